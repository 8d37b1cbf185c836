package pid1

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/landlock"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/seccomp"
)

// IsInit reports whether this process was started as a sandbox's init.
func IsInit() bool { return len(os.Args) > 0 && os.Args[0] == guest.Arg0 }

// Run runs the sandbox's PID 1 and never returns. main (and TestMain of tests that start
// sandboxes) calls it first thing when IsInit() is true.
//
// Everything that shapes what a command inherits — namespace membership of the thread, Landlock,
// no_new_privs, capabilities, seccomp — is per thread in Linux, so init does all of its work on
// one locked OS thread, starts every command from it, and runs no other goroutines.
func Run() {
	runtime.LockOSThread()
	os.Exit(run())
}

func run() int {
	t0 := time.Now()
	phases := map[string]int64{}
	phase := func(name string) { phases[name] = time.Since(t0).Microseconds() }
	// Nothing init holds may reach a command but what it is handed: the control socket (which
	// would let a command read other execs' requests and their descriptors) and whatever the
	// airlock process inherited and did not mark close-on-exec.
	if err := cloexecFrom(guest.ControlFd); err != nil {
		fmt.Fprintln(os.Stderr, "airlock-init:", err)
		return 1
	}
	ctl := initConn{fd: guest.ControlFd}
	dial := os.Getenv(guest.ControlEnv)
	if dial != "" {
		fd, err := dialControl(dial)
		if err != nil {
			fmt.Fprintln(os.Stderr, "airlock-init:", err)
			return 1
		}
		ctl.fd = fd
	}
	buf := make([]byte, guest.MaxMessage)
	fail := func(err error) int {
		ctl.tell(&guest.Message{Kind: guest.MsgError, Error: err.Error()})
		return 1
	}
	m, fds, err := ctl.recv(buf)
	if err != nil || m.Kind != guest.MsgConfig || m.Config == nil {
		fmt.Fprintln(os.Stderr, "airlock-init: no config:", err)
		return 1
	}
	c := m.Config
	phase("config")
	// The root filesystem is built while the host moves us into the sandbox's cgroup.
	var pids *guestCgroup
	if err == nil && c.GuestPids > 0 {
		pids, err = newGuestCgroup(c.GuestPids)
	}
	layer := -1
	if err == nil {
		layer, err = setup(c, fds)
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	if err != nil {
		return fail(err)
	}
	phase("root")
	if m, _, err = ctl.recv(buf); err != nil || m.Kind != guest.MsgPlaced {
		return fail(errors.New("driver did not confirm the cgroup"))
	}
	// A cgroup namespace rooted at the sandbox's cgroup hides the host's cgroup paths. A
	// container runtime made one already (runc), or has no host cgroups to hide (gVisor).
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil && !c.Container {
		return fail(fmt.Errorf("unshare cgroup namespace: %w", err))
	}
	if c.OrphanGraceMs > 0 {
		// An adoptable sandbox outlives its maker by design (the grace ends it); the parent-death
		// signal, which guards the setup, would kill it with the daemon. (The kernel clears it at
		// lockdown's setuid anyway, but not for a sandbox whose user is root.)
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, 0, 0, 0, 0); err != nil {
			return fail(fmt.Errorf("clear parent-death signal: %w", err))
		}
	}
	phase("placed")
	if err := lockdown(c); err != nil {
		return fail(err)
	}
	phase("lockdown")
	if err := ctl.send(&guest.Message{Kind: guest.MsgReady, Phases: phases}); err != nil {
		return 1
	}
	srv := &initServer{ctl: ctl, buf: buf, listen: -1, layer: layer, as: user{c.UID, c.GID}, guest: pids,
		procs: map[int]running{}, doomed: map[int]bool{}, relays: map[*stdioRelay]bool{}}
	if c.Token != "" && dial != "" {
		srv.dial, srv.token = dial, c.Token
	}
	if c.OrphanGraceMs > 0 {
		srv.listen, srv.grace = guest.ListenFd, time.Duration(c.OrphanGraceMs)*time.Millisecond
	}
	srv.serve()
	return 0
}

// setup turns this process into the sandbox: root filesystem, hostname, loopback, limits. It
// returns init's clone of the writable layer it built (see buildRoot), -1 when a container
// runtime built the root.
func setup(c *guest.Config, fds []int) (layer int, err error) {
	if c.Container {
		return -1, setLimits(c)
	}
	if layer, err = buildRoot(c, fds); err != nil {
		return layer, err
	}
	if err := unix.Sethostname([]byte(c.Hostname)); err != nil {
		return layer, fmt.Errorf("sethostname: %w", err)
	}
	if !c.HostNet {
		if err := loopbackUp(); err != nil {
			return layer, err
		}
	}
	return layer, setLimits(c)
}

func setLimits(c *guest.Config) error {
	// syscall.Setrlimit (not unix.) so that the Go runtime hands this limit to children instead of
	// restoring the soft limit it found at start.
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: c.NoFile, Max: c.NoFile}); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE %d: %w", c.NoFile, err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return fmt.Errorf("RLIMIT_CORE: %w", err)
	}
	return nil
}

// lockdown applies, in order: Landlock, no_new_privs, the bounding set, the user, no capabilities,
// non-dumpable, seccomp. Each step only removes privilege; seccomp comes last because it forbids
// the calls the earlier steps need.
func lockdown(c *guest.Config) error {
	if c.Landlock && len(c.LandRules) > 0 {
		rules := make([]landlock.Rule, len(c.LandRules))
		for i, r := range c.LandRules {
			rules[i] = landlock.Rule{Path: r.Path, Write: r.Write}
		}
		if _, err := landlock.Restrict(rules); err != nil && !errors.Is(err, landlock.ErrUnavailable) {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	for cp := 0; cp <= unix.CAP_LAST_CAP; cp++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(cp), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from bounding set: %w", cp, err)
		}
	}
	// Init becomes its own user, one no command runs as: then no command may signal init (gVisor,
	// unlike Linux, lets a pid namespace's processes kill its init) or trace it. It keeps only the
	// capabilities it needs to start commands as their user, to give them their terminal and to
	// signal them; a command loses them at exec, since the bounding set is empty.
	if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("keep capabilities: %w", err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(guest.InitUID, guest.InitUID, guest.InitUID); err != nil {
		return fmt.Errorf("setgid %d: %w", guest.InitUID, err)
	}
	if err := syscall.Setresuid(guest.InitUID, guest.InitUID, guest.InitUID); err != nil {
		return fmt.Errorf("setuid %d: %w", guest.InitUID, err)
	}
	if err := setCaps(initKeeps...); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("set non-dumpable: %w", err)
	}
	if len(c.Seccomp) == 0 || len(c.Seccomp)%8 != 0 {
		return errors.New("seccomp: no filter in the configuration")
	}
	prog := unsafe.Slice((*unix.SockFilter)(unsafe.Pointer(&c.Seccomp[0])), len(c.Seccomp)/8)
	if err := seccomp.Load(prog); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

// ttyGID is the group of terminals (devpts is mounted with gid=5).
const ttyGID = 5

// initKeeps are the capabilities a locked-down init holds (in its user namespace).
var initKeeps = []uintptr{unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_KILL, unix.CAP_CHOWN}

// setCaps makes caps init's effective and permitted sets, with nothing inheritable or ambient.
func setCaps(caps ...uintptr) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	for _, c := range caps {
		data[c/32].Effective |= 1 << (c % 32)
		data[c/32].Permitted |= 1 << (c % 32)
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	return nil
}

// cloexecFrom marks every descriptor from fd up close-on-exec.
func cloexecFrom(fd int) error {
	if err := unix.CloseRange(uint(fd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	// Before Linux 5.11: one by one.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list descriptors: %w", err)
	}
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= fd {
			unix.CloseOnExec(n)
		}
	}
	return nil
}

// loopbackUp brings lo up in the sandbox's fresh network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// running is a command init started: its exec ID and a pidfd that becomes readable when it exits.
type running struct {
	id    string
	pidfd int
	tty   *os.File   // the terminal's master, when init relays it
	outs  []*outCopy // the output init relays, which the exit waits for (drain.go)
}

// orphanPoll bounds how long an orphan (a process whose parent died, reparented to init) stays a
// zombie: init reaps on every wake-up and at least this often (ms).
const orphanPoll = 200

// serve runs commands until the host closes the control socket, then returns; init's exit takes
// every process in the sandbox with it (the kernel kills a PID namespace with its PID 1).
// user is whom init starts commands as.
type user struct{ uid, gid int }

// initServer is a locked-down init serving its host.
type initServer struct {
	ctl    initConn
	buf    []byte
	listen int           // the adoption socket, or -1
	grace  time.Duration // how long to wait for a new host after the last went away
	layer  int           // init's clone of the writable layer it built (guest.MsgLayer), or -1
	as     user
	guest  *guestCgroup // the process limit, when the sandbox's kernel enforces it (gVisor)
	procs  map[int]running
	doomed map[int]bool // process groups of killed commands, until they are empty

	dial, token string // where to dial the control socket again when it breaks, and how to say it is us (see redial.go)
	relayMu     sync.Mutex
	relays      map[*stdioRelay]bool // the streams init relays (with dial), until they end
	exits       []*pendingExit       // exits waiting for their output to be sent (drain.go)
}

func (srv *initServer) serve() {
	ctl, buf, listen, grace, procs := &srv.ctl, srv.buf, srv.listen, srv.grace, srv.procs
	var orphaned time.Time // when the host went away, while no other has connected
	for {
		fds := make([]unix.PollFd, 0, 2+len(procs))
		ctlAt, listenAt := -1, -1
		if ctl.fd >= 0 {
			ctlAt = len(fds)
			fds = append(fds, unix.PollFd{Fd: int32(ctl.fd), Events: unix.POLLIN})
		}
		if listen >= 0 {
			listenAt = len(fds)
			fds = append(fds, unix.PollFd{Fd: int32(listen), Events: unix.POLLIN})
		}
		for _, r := range procs {
			fds = append(fds, unix.PollFd{Fd: int32(r.pidfd), Events: unix.POLLIN})
		}
		wait := orphanPoll
		if len(srv.exits) > 0 {
			wait = drainPoll
		}
		if _, err := unix.Poll(fds, wait); err != nil && err != unix.EINTR {
			return
		}
		srv.reap()
		srv.tellExits()
		srv.guest.sample()
		// A new host (the daemon, restarted) takes the sandbox over; it is checked before the
		// grace, so that one that connected in time is never turned away.
		if listenAt >= 0 && fds[listenAt].Revents != 0 {
			if nfd, _, err := unix.Accept4(listen, unix.SOCK_CLOEXEC); err == nil {
				if ctl.fd >= 0 {
					unix.Close(ctl.fd)
				}
				ctl.fd, orphaned, ctlAt = nfd, time.Time{}, -1
			}
		}
		if ctl.fd < 0 {
			if time.Since(orphaned) > grace {
				return // nobody came back: the sandbox ends with its init
			}
			continue
		}
		if ctlAt < 0 || fds[ctlAt].Revents == 0 {
			continue
		}
		m, passed, err := ctl.recv(buf)
		if err != nil && srv.dial != "" {
			if srv.redial() {
				continue
			}
			return
		}
		if err != nil {
			if listen < 0 {
				return
			}
			// The host is gone (the daemon died): keep the sandbox for a while, for it to
			// come back and adopt it.
			unix.Close(ctl.fd)
			ctl.fd, orphaned = -1, time.Now()
			continue
		}
		switch m.Kind {
		case guest.MsgExec:
			srv.startExec(m, passed)
		case guest.MsgSignal:
			for pid, r := range procs {
				if r.id == m.ID {
					// Commands lead their own session, so -pid reaches their process group.
					// ESRCH, the only failure, says it is gone already.
					_ = unix.Kill(-pid, unix.Signal(m.Signal))
					_ = unix.Kill(pid, unix.Signal(m.Signal))
					if m.Signal == int(unix.SIGKILL) {
						srv.doomed[pid] = true
					}
				}
			}
		case guest.MsgOOM:
			srv.guest.oomKill()
		case guest.MsgResize:
			for _, r := range procs {
				if r.id == m.ID && r.tty != nil && m.Size != nil {
					guest.SetWinsize(r.tty, *m.Size)
				}
			}
			ctl.tell(&guest.Message{Kind: guest.MsgResize, ID: m.ID}) // in force: the host may send what follows it
		case guest.MsgPing:
			ctl.tell(&guest.Message{Kind: guest.MsgPong, ID: m.ID, Guest: srv.guest.stats()})
		case guest.MsgQuiesce:
			srv.quiesce(m.ID)
		case guest.MsgLayer:
			if srv.layer < 0 {
				ctl.tell(&guest.Message{Kind: guest.MsgError, ID: m.ID, Error: "this sandbox's layer is the host's"})
			} else {
				ctl.tell(&guest.Message{Kind: guest.MsgLayer, ID: m.ID}, srv.layer)
			}
		}
		for _, fd := range passed {
			unix.Close(fd)
		}
	}
}

// reap collects every child that has exited — commands and orphans alike — and reports the
// commands' ends.
func (srv *initServer) reap() {
	// Commands first: their ends are what the host waits for, and a sandbox full of exiting
	// orphans (a fork bomb being killed, say) must not hold them up.
	for pid, r := range srv.procs {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, &ru); got == pid && err == nil {
			srv.exited(pid, r, ws, &ru)
		}
	}
	// Then orphans, for a bounded time per wake-up: in a sandbox starved of CPU (a fork bomb in
	// gVisor, say) each wait can take long, and the host's next message (the kill) must wait.
	for deadline := time.Now().Add(reapBudget); time.Now().Before(deadline); {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, &ru)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			break
		}
		if r, ok := srv.procs[pid]; ok {
			srv.exited(pid, r, ws, &ru)
		}
	}
	// A killed command's process group is killed again until it is empty: a process its
	// members forked while the first kill went round (gVisor does not stop forks of a group being
	// killed, as Linux does) would otherwise live on.
	for pg := range srv.doomed {
		if unix.Kill(-pg, unix.SIGKILL) == unix.ESRCH {
			delete(srv.doomed, pg)
		}
	}
}

// reapBudget bounds the time init spends reaping orphans per wake-up.
const reapBudget = 10 * time.Millisecond

// exited reports the end of command pid.
func (srv *initServer) exited(pid int, r running, ws syscall.WaitStatus, ru *syscall.Rusage) {
	delete(srv.procs, pid)
	unix.Close(r.pidfd)
	// The command's own usage and that of the descendants it waited for: what this exec cost,
	// without the background processes of earlier ones. ru_maxrss is in KiB.
	cpuUs := (ru.Utime.Nano() + ru.Stime.Nano()) / 1000
	m := &guest.Message{Kind: guest.MsgExited, ID: r.id, Usage: &guest.Rusage{CPUMicros: cpuUs, MaxRSSKiB: ru.Maxrss}, Guest: srv.guest.counts()}
	switch {
	case ws.Exited():
		m.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		m.Signal = int(ws.Signal())
		m.ExitCode = 128 + m.Signal
	}
	if p := newPendingExit(m, r.outs); !p.ready() {
		srv.exits = append(srv.exits, p)
		return
	}
	srv.ctl.tell(m)
}

func (srv *initServer) startExec(m *guest.Message, fds []int) {
	ctl, procs, as := srv.ctl, srv.procs, srv.as
	e := m.Exec
	// A terminal comes with no descriptor (init sends its master back), or with one: a socket to
	// relay it through (see relayTerminal).
	if e == nil || len(e.Argv) == 0 || (e.TTY == nil && len(fds) != 3) || (e.TTY != nil && len(fds) > 1) {
		ctl.tell(&guest.Message{Kind: guest.MsgError, ID: m.ID, Error: "malformed exec request"})
		return
	}
	path, err := lookPath(e.Argv[0], e.Env)
	if err != nil {
		ctl.tell(&guest.Message{Kind: guest.MsgError, ID: m.ID, Error: err.Error(), ExitCode: 127})
		return
	}
	pidfd, master := -1, -1
	sys := &syscall.SysProcAttr{Setsid: true, PidFD: &pidfd,
		Credential: &syscall.Credential{Uid: uint32(as.uid), Gid: uint32(as.gid), Groups: []uint32{}}}
	var rl *relay
	if e.TTY != nil {
		var peer int
		if master, peer, err = openTerminal(*e.TTY, as); err != nil {
			ctl.tell(&guest.Message{Kind: guest.MsgError, ID: m.ID, Error: err.Error(), ExitCode: 126})
			return
		}
		defer unix.Close(master)
		defer unix.Close(peer)
		if len(fds) == 1 {
			// fds are the serve loop's to close, master this function's: the relay gets copies.
			if rl, err = newRelay(master, fds[0]); err != nil {
				ctl.tell(&guest.Message{Kind: guest.MsgError, ID: m.ID, Error: err.Error(), ExitCode: 126})
				return
			}
			defer func() {
				if rl != nil { // the command did not start
					rl.close()
				}
			}()
		}
		fds = []int{peer, peer, peer}
		// The terminal becomes the controlling terminal of the command's new session.
		sys.Setctty, sys.Ctty = true, 0
	}
	var sr *stdioRelay
	if srv.dial != "" && e.TTY == nil {
		if sr, err = newStdioRelay(fds); err != nil {
			ctl.tell(&guest.Message{Kind: guest.MsgError, ID: m.ID, Error: err.Error(), ExitCode: 126})
			return
		}
		defer func() {
			if sr != nil { // the command did not start
				sr.close()
			}
		}()
		fds = sr.child[:]
	}
	attr := &syscall.ProcAttr{
		Dir:   e.Dir,
		Env:   e.Env,
		Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])},
		Sys:   sys,
	}
	pid, err := syscall.ForkExec(path, e.Argv, attr)
	if err != nil {
		// Exit codes as a shell gives them: 127 not found, 126 found but not runnable.
		code := 126
		if errors.Is(err, syscall.ENOENT) {
			code = 127
		}
		ctl.tell(&guest.Message{Kind: guest.MsgError, ID: m.ID, Error: fmt.Sprintf("exec %s: %v", e.Argv[0], err), ExitCode: code})
		return
	}
	r := running{id: m.ID, pidfd: pidfd}
	var pass []int
	switch {
	case rl != nil:
		r.tty = rl.master
		rl.start()
		r.outs = append(r.outs, rl.out)
		rl = nil
	case master >= 0:
		pass = []int{master}
	}
	if sr != nil {
		srv.relayMu.Lock()
		srv.relays[sr] = true
		srv.relayMu.Unlock()
		relay := sr
		sr.start(func() {
			srv.relayMu.Lock()
			delete(srv.relays, relay)
			srv.relayMu.Unlock()
		})
		r.outs = append(r.outs, sr.outs[1], sr.outs[2])
		sr = nil
	}
	procs[pid] = r
	ctl.tell(&guest.Message{Kind: guest.MsgStarted, ID: m.ID, Pid: pid, Guest: srv.guest.counts()}, pass...)
}

// openTerminal makes a new pseudo-terminal on the sandbox's own devpts (/dev/ptmx points into
// it), gives its slave to the command's user, and returns the master and an open slave. It runs
// after lockdown: /dev is writable for Landlock, and seccomp allows these ioctls.
func openTerminal(size sandbox.Winsize, as user) (master, slave int, err error) {
	master, err = unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	fail := func(what string, err error) (int, int, error) {
		unix.Close(master)
		return -1, -1, fmt.Errorf("terminal: %s: %w", what, err)
	}
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		return fail("unlock", err)
	}
	if err := unix.IoctlSetWinsize(master, unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols}); err != nil {
		return fail("set size", err)
	}
	// TIOCGPTPEER (Linux 4.13) opens the slave through the master, not by a path that could
	// have been replaced.
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return fail("open slave", errno)
	}
	// As on a login: the user owns its terminal, the tty group may write to it.
	if err := unix.Fchown(int(fd), as.uid, ttyGID); err != nil {
		unix.Close(int(fd))
		return fail("chown slave", err)
	}
	return master, int(fd), nil
}

// lookPath finds file in the PATH of env, inside the sandbox's root.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	pathEnv := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range strings.Split(pathEnv, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %s: executable file not found in $PATH", file)
}
