package container

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// runtime is one OCI runtime binary and what differs between them: flags, how init's control
// socket reaches the container, and who owns the files a sandbox user creates.
type runtime struct {
	name     string // sandbox.RuntimeRunsc or sandbox.RuntimeRunc
	path     string // "" when not installed
	version  string
	root     string // the runtime's state directory, airlock's own
	platform string // runsc: systrap, ptrace, kvm
	debugLog string // runsc: a directory for its debug logs ("" none)
}

// cid is the runtime's name of sandbox id's container. runsc takes any unique prefix of a name
// for the name, and refuses one that is the whole of one name and the start of another ("sbx_1"
// and "sbx_1-r1", a restore's instance of it) as ambiguous: a '.', which no sandbox id holds,
// ends every name, and no name then starts another.
func (r *runtime) cid(id string) string {
	if r.name == sandbox.RuntimeRunsc {
		return id + "."
	}
	return id
}

// global are the flags before the subcommand.
func (r *runtime) global(networked bool) []string {
	args := []string{"--root", r.root}
	if r.name == sandbox.RuntimeRunsc {
		// --network=host: the sentry's sockets are host sockets of the network namespace airlock
		// made for the sandbox, so airlock's firewall, DNS and proxy police them exactly as they
		// police the process level. (gVisor's own netstack would send raw frames past that
		// firewall.) --overlay2=none: writes go to the host-side layer airlock capped at diskMb.
		net := "none"
		if networked {
			net = "host"
		}
		// --host-uds=open: init dials its control socket, the one host socket in the sandbox's
		// tree (see host.Launcher.Control); gVisor's checkpoint can save no socket the host
		// passed in.
		// --restore-spec-validation=warning: a restore is a new instance with a host uid range
		// of its own (every live sandbox has one), and runsc's validation refuses any change of
		// the spec's id mappings. The mappings only say which host ids the gofer acts as; the
		// sandbox's kernel sees its own ids 0..65535 either way, and the restored layer's owners
		// are mapped into the new range. The rest of the spec is airlock's, the same shape.
		// --gofer-network-namespace=new: each gofer gets an empty network namespace of its own.
		// The default ("null") pins the first gofer's namespace at <root>/null-netns for every
		// later gofer to join; a gofer started inside a networked sandbox's namespace is not
		// in an empty one, so that pinned the sandbox's namespace past its end and had other
		// sandboxes' gofers join it.
		args = append(args, "--platform", r.platform, "--network", net, "--overlay2", "none", "--host-uds", "open",
			"--restore-spec-validation", "warning", "--gofer-network-namespace", "new")
		if r.debugLog != "" {
			args = append(args, "--debug", "--debug-log", r.debugLog+"/")
		}
	}
	return args
}

// start creates and starts container id from the bundle in dir, detached, inside gw's network
// namespace when gw is not nil, with ctl, when not nil, as the container process's descriptor 3
// (runc; gVisor's init dials its control socket). With image, runsc restores the container from
// the memory image in that directory instead. It returns the pid the runtime reports: the
// container's init (runc) or the sandbox process (runsc).
func (r *runtime) start(ctx context.Context, id, dir string, ctl *os.File, gw *egress.Gateway, image string) (int, error) {
	args := []string{"run"}
	if image != "" {
		args = []string{"restore", "--image-path", image}
	}
	args = append(args, "--detach", "--bundle", dir, "--pid-file", filepath.Join(dir, "pid"))
	if r.name == sandbox.RuntimeRunc {
		args = append(args, "--preserve-fds", "1", "--no-new-keyring")
	}
	if err := r.run(ctx, dir, ctl, gw, append(args, r.cid(id))...); err != nil {
		return 0, err
	}
	return readPid(r.name, dir)
}

// create has runsc create container id from the bundle in dir — its sandbox process, gofer,
// mounts and cgroups — without starting anything in it, for restoreCreated to restore a memory
// image into later. It returns the sandbox process's pid.
func (r *runtime) create(ctx context.Context, id, dir string, gw *egress.Gateway) (int, error) {
	if err := r.run(ctx, dir, nil, gw, "create", "--bundle", dir, "--pid-file", filepath.Join(dir, "pid"), r.cid(id)); err != nil {
		return 0, err
	}
	return readPid(r.name, dir)
}

// restoreCreated restores the memory image in directory image into container id, which create
// made, and leaves it running.
func (r *runtime) restoreCreated(ctx context.Context, id, dir, image string) error {
	return r.run(ctx, dir, nil, nil, "restore", "--detach", "--image-path", image, r.cid(id))
}

// run runs the runtime's subcommand args[0] with its flags args[1:] in the bundle dir, inside
// gw's network namespace when gw is not nil, with ctl as descriptor 3 when not nil, and waits for
// it. Its output goes to the bundle's runtime.log, whose last lines an error quotes.
func (r *runtime) run(ctx context.Context, dir string, ctl *os.File, gw *egress.Gateway, args ...string) error {
	// The container's init inherits the runtime's standard streams; a file, so that nothing
	// waits on a pipe the container holds open.
	logf, err := os.OpenFile(filepath.Join(dir, "runtime.log"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(r.path, append(r.global(gw != nil), args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if ctl != nil {
		cmd.ExtraFiles = []*os.File{ctl}
	}
	cmd.Dir = dir
	if gw != nil {
		// Started inside the sandbox's network namespace, which the bundle does not replace.
		err = gw.Link.Run(cmd.Start)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = cmd.Process.Kill() // it fails only for a process that ended, which Wait reaps too
		_ = <-waited           // killed: its error says so
		return ctx.Err()
	}
	if err != nil {
		out, _ := os.ReadFile(logf.Name())
		return fmt.Errorf("%s %s: %w: %s", r.name, args[0], err, lastLines(out, 5))
	}
	return nil
}

// readPid reads the pid file the runtime wrote into the bundle dir.
func readPid(name, dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return 0, fmt.Errorf("%s: no pid file: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: bad pid file %q", name, b)
	}
	return pid, nil
}

// checkpoint saves runsc container id's kernel — its processes, their memory and descriptors —
// into the directory image and leaves it running.
func (r *runtime) checkpoint(ctx context.Context, id, image string) error {
	return r.command(ctx, "checkpoint", "--leave-running", "--compression", "none", "--image-path", image, r.cid(id))
}

// command runs one runtime subcommand; its last argument is a container's runtime name (cid).
func (r *runtime) command(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, r.path, append(r.global(false), args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", r.name, args[0], err, lastLines(out, 3))
	}
	return nil
}

// delete kills container id, if it still runs, and removes the runtime's state of it. A container
// the runtime does not know is not an error.
func (r *runtime) delete(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	args := append(r.global(false), "delete", "--force", r.cid(id))
	out, err := exec.CommandContext(ctx, r.path, args...).CombinedOutput()
	if err != nil && !r.known(r.cid(id)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s delete %s: %w: %s", r.name, id, err, lastLines(out, 3))
	}
	return nil
}

// known reports whether the runtime has state for container id.
func (r *runtime) known(id string) bool {
	_, err := os.Stat(filepath.Join(r.root, id))
	if err == nil {
		return true
	}
	// runsc keeps "<id>_sandbox:<id>.state"-style files rather than one directory per container.
	m, _ := filepath.Glob(filepath.Join(r.root, "*"+id+"*"))
	return len(m) > 0
}

// list returns the ids of the containers the runtime has state for.
func (r *runtime) list(ctx context.Context) []string {
	if r.path == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := append(r.global(false), "list", "--quiet")
	out, err := exec.CommandContext(ctx, r.path, args...).Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(bytes.ToValidUTF8(b, nil))), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
