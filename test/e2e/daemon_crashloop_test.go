package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/levels"
	"github.com/airlockrun/airlock/internal/mountinfo"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// The crash loop: crashKills rounds of crashWorkers clients working in parallel, each ended by a
// kill -9 of the daemon at a random point and followed by a restart and a check of everything
// the clients were told.
const (
	crashKills   = 5
	crashWorkers = 4
	crashMaxLive = 3 // sandboxes a worker keeps live at most
)

// TestDaemonCrashLoop kills the daemon (kill -9) five times at random points while clients create
// process-level sandboxes (egress none, or restricted: a network namespace, a veth and a
// firewall each), run short and long commands in them, pause, resume, snapshot, restore, fork and
// delete them. One round, picked at random, ends in a burst of DELETEs of paused sandboxes. After
// each restart every acknowledged operation holds: a created sandbox exists, live and usable or
// ended with a reason; a deleted one is terminated with nothing of it on the host; an exec is
// done with its exit code and output; a snapshot is listed and restores. What got no answer may
// have happened or not, but the record and the host agree, no exec is running, and a retried
// DELETE finishes whatever was cut off. After the final clean stop the instance leaves nothing,
// at once: no process, cgroup, uid range, mount, network namespace, veth, nftables table, socket
// file or snapshot blob that no snapshot uses.
//
// The daemon runs in a network namespace of the test's own, so that the veths it makes are
// counted apart from those of any other airlock on the host. The random points come from a seed
// that the test logs; AIRLOCK_CRASH_SEED=<seed> replays its choices (not the timing of the
// host).
func TestDaemonCrashLoop(t *testing.T) {
	seed := crashSeed(t)
	hut := fmt.Sprintf("/proc/%d/ns/net", holdNamespace(t).Process.Pid)
	ipIn(t, hut, "link", "set", "lo", "up")
	check := leakCheck(t)
	dir := t.TempDir() + "/data"
	key := newKey(t, dir, "t1")
	l := newCrashLedger(t, dir, hut)
	stopWatch := l.watch()
	defer stopWatch()
	d := startDaemonIn(t, hut, dir)
	rng := rand.New(rand.NewPCG(seed, 0))
	burst := rng.IntN(crashKills)
	for round := range crashKills {
		l.round = round
		c := d.client(key)
		delay := time.Duration(100+rng.IntN(1900)) * time.Millisecond
		if round == burst {
			l.runWorkers(c, seed, delay, nil)
			l.deleteBurst(c, time.Duration(2+rng.IntN(25))*time.Millisecond, d.kill9)
		} else {
			l.runWorkers(c, seed, delay, d.kill9)
		}
		d = startDaemonIn(t, hut, dir)
		l.verify(d.client(key))
		if t.Failed() {
			t.FailNow() // the log of this round's daemons says what went wrong; later rounds would bury it
		}
	}
	// A last round without a kill, then a clean stop with sandboxes live, some of them paused.
	l.round = crashKills
	c := d.client(key)
	l.runWorkers(c, seed, 500*time.Millisecond, nil)
	for i, id := range l.liveIDs() {
		l.mu.Lock()
		paused := l.boxes[id].paused
		l.mu.Unlock()
		if i%2 == 0 && !paused {
			if _, err := c.Pause(bg(), id); err != nil {
				t.Errorf("pause %s before the clean stop: %v", id, err)
			}
		}
	}
	snaps, err := c.Snapshots(bg(), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	stopWatch()
	// At once: no grace, no poll.
	if left := append(l.leftovers(), unusedBlobs(dir, snaps)...); len(left) > 0 {
		t.Errorf("after the clean stop the instance left %v", left)
	}
	check()
	// Not blind: the loop made what it checks for.
	if len(l.netns) == 0 || l.veths == 0 || len(l.ranges) == 0 {
		t.Errorf("the checks are blind: %d network namespaces, %d veths at most, %d uid ranges seen", len(l.netns), l.veths, len(l.ranges))
	}
	t.Logf("%d sandboxes (%d network namespaces, %d veths at most), %d acknowledged execs, %d snapshots; operations: %v",
		len(l.boxes), len(l.netns), l.veths, len(l.execs), len(l.snaps), l.stats)
}

// crashSeed returns $AIRLOCK_CRASH_SEED, or a new seed, and logs it.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("AIRLOCK_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("AIRLOCK_CRASH_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("crash seed %d (AIRLOCK_CRASH_SEED=%d replays it)", seed, seed)
	return seed
}

// crashLedger is what the clients of the crash loop were told, and what the test saw of the
// instance's sandboxes on the host.
type crashLedger struct {
	t     *testing.T
	dir   string // the daemon's data dir
	hut   string // the network namespace the daemon runs in
	round int

	mu     sync.Mutex // guards everything below
	boxes  map[string]*crashBox
	execs  []crashExec
	snaps  map[string]*crashSnap
	ranges map[string]uidalloc.Record // every uid range seen, by sandbox
	netns  map[uint64]uint64          // every sandbox network namespace seen: cookie → inode
	stats  map[string]int             // operations by kind and outcome
	veths  int                        // the most veths seen at a check
}

// crashBox is one sandbox the test knows the ID of.
type crashBox struct {
	owner    int    // the worker that uses it; -1: none (found in a listing: its create got no answer)
	acked    bool   // its create was acknowledged
	live     bool   // believed live: its owner may use it
	paused   bool   // its last acknowledged pause or resume was a pause
	deleted  bool   // a DELETE of it was acknowledged
	deleting bool   // a DELETE of it got no answer: it may have happened or not
	marker   string // what /workspace/m holds; "" unknown
}

// crashExec is an acknowledged exec.
type crashExec struct {
	sandbox, id, stdout string
	exit                int
}

// crashSnap is one snapshot the test knows the ID of.
type crashSnap struct {
	owner    int    // the worker that uses it; -1: none (found in a listing: its snapshot got no answer)
	acked    bool   // the snapshot was acknowledged
	marker   string // what its /workspace/m holds; "" unknown
	verified bool   // a sandbox was made from it after a restart
	deleted  bool   // a DELETE of it was acknowledged
	deleting bool   // a DELETE of it got no answer
}

func newCrashLedger(t *testing.T, dir, hut string) *crashLedger {
	return &crashLedger{t: t, dir: dir, hut: hut, boxes: map[string]*crashBox{}, snaps: map[string]*crashSnap{},
		ranges: map[string]uidalloc.Record{}, netns: map[uint64]uint64{}, stats: map[string]int{}}
}

// watch records, until the returned function is first called, the uid ranges and network
// namespaces of the instance's sandboxes as they come and go, so that what a crash left of a
// short-lived one can be told apart later.
func (l *crashLedger) watch() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		seen := map[string]bool{} // "pid inode" already identified
		for {
			l.mergeRanges()
			l.mergeNetns(seen)
			select {
			case <-done:
				return
			case <-time.After(150 * time.Millisecond):
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// mergeRanges adds the instance's uid ranges recorded now.
func (l *crashLedger) mergeRanges() {
	rs := rangesOf(l.dir)
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, r := range rs {
		l.ranges[id] = r
	}
}

// mergeNetns adds the network namespaces the processes in the instance's sandbox cgroups are in
// now. A namespace is known by its cookie, which the kernel never reuses (its inode number is
// reused at once by the next namespace made on the host).
func (l *crashLedger) mergeNetns(seen map[string]bool) {
	own := map[uint64]bool{}
	for _, p := range []string{l.hut, "/proc/self/ns/net"} {
		if c, err := netnsCookie(p); err == nil {
			own[c] = true
		}
	}
	for cg := range instanceCgroups("airlock", uidalloc.InstanceOf(l.dir)) {
		for _, pid := range cgroupDirPids(cg) {
			link := fmt.Sprintf("/proc/%d/ns/net", pid)
			ino, err := nsInode(link)
			key := fmt.Sprint(pid, ino)
			if err != nil || seen[key] {
				continue
			}
			seen[key] = true
			if c, err := netnsCookie(link); err == nil && !own[c] {
				l.mu.Lock()
				l.netns[c] = ino
				l.mu.Unlock()
			}
		}
	}
}

// netnsCookie returns the cookie of the network namespace at path (SO_NETNS_COOKIE).
func netnsCookie(path string) (uint64, error) {
	var cookie uint64
	err := inNetns(path, func() error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		cookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		return err
	})
	return cookie, err
}

// runWorkers runs the workers against c for delay, then calls kill (nil: none) and stops them.
func (l *crashLedger) runWorkers(c *client.Client, seed uint64, delay time.Duration, kill func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range crashWorkers {
		w := &crashWorker{l: l, c: c, id: i, rng: rand.New(rand.NewPCG(seed, uint64(1+l.round*crashWorkers+i)))}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !w.step() {
					return // the daemon is gone
				}
			}
		})
	}
	time.Sleep(delay)
	if kill != nil {
		l.mergeRanges() // of sandboxes made since the last look, before the kill frees any
		kill()
	}
	close(stop)
	wg.Wait()
}

// deleteBurst pauses every live sandbox, then DELETEs them all at once with creates in flight,
// and calls kill after delay.
func (l *crashLedger) deleteBurst(c *client.Client, delay time.Duration, kill func()) {
	ids := l.liveIDs()
	forEach(ids, func(id string) {
		l.mu.Lock()
		paused := l.boxes[id].paused
		l.mu.Unlock()
		if paused {
			return
		}
		_, err := c.Pause(bg(), id)
		l.answered("pause "+id, err, func() { l.boxes[id].paused = true })
	})
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { _ = l.terminate(c, id) }) // the ledger records the answer
		if i%3 == 0 {
			wg.Go(func() { _ = l.create(c, -1, api.EgressNone, "") }) // likewise
		}
	}
	time.Sleep(delay)
	l.mergeRanges()
	kill()
	wg.Wait()
}

// liveIDs lists the sandboxes believed live.
func (l *crashLedger) liveIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for id, b := range l.boxes {
		if b.live {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// answered records the outcome of an operation: on success it calls ok under the ledger's lock
// and returns true. A daemon's refusal fails the test (a worker's operations are on its own
// sandboxes, in an order that makes them valid); no answer at all (the daemon was killed) is an
// unknown outcome, which the next check resolves.
func (l *crashLedger) answered(what string, err error, ok func()) bool {
	kind, _, _ := strings.Cut(what, " ")
	var ce *client.Error
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.stats[kind+" acknowledged"]++
		ok()
		return true
	case errors.As(err, &ce):
		l.t.Errorf("round %d: %s: %v", l.round, what, err)
	default:
		l.stats[kind+" cut off"]++
	}
	return false
}

// create creates a sandbox for owner with egress policy egress (from snapshot snap unless "").
func (l *crashLedger) create(c *client.Client, owner int, egress, snap string) error {
	spec := smallSpec()
	spec.Network = api.Network{EgressPolicy: egress}
	if egress == api.EgressRestricted {
		// Names only: nothing is ever sent (the daemon's namespace has nothing but loopback).
		spec.Network.AllowedDomains = []string{"localhost.test"}
	}
	marker := ""
	if snap != "" {
		spec = api.Spec{FromSnapshot: snap, Network: spec.Network}
		l.mu.Lock()
		marker = l.snaps[snap].marker
		l.mu.Unlock()
	}
	sb, err := c.Create(bg(), spec)
	l.answered("create", err, func() {
		l.boxes[sb.ID] = &crashBox{owner: owner, acked: true, live: owner >= 0, marker: marker}
	})
	return err
}

// terminate DELETEs sandbox id.
func (l *crashLedger) terminate(c *client.Client, id string) error {
	l.mu.Lock()
	l.boxes[id].live = false // whatever the answer, no one uses it any more
	l.mu.Unlock()
	sb, err := c.Terminate(bg(), id)
	if err == nil && sb.Status != api.StatusTerminated {
		l.t.Errorf("round %d: DELETE %s answered %s", l.round, id, sb.Status)
	}
	if !l.answered("DELETE "+id, err, func() { l.boxes[id].deleted = true }) {
		l.mu.Lock()
		l.boxes[id].deleting = true
		l.mu.Unlock()
	}
	return err
}

// crashWorker is one client of the crash loop: it works on sandboxes of its own, one operation
// at a time.
type crashWorker struct {
	l   *crashLedger
	c   *client.Client
	id  int
	rng *rand.Rand
	n   int // operations so far, for unique output
}

// step does one random operation and returns false if the daemon did not answer.
func (w *crashWorker) step() bool {
	l := w.l
	w.n++
	token := fmt.Sprintf("r%d-w%d-%d", l.round, w.id, w.n)
	l.mu.Lock()
	var mine []string
	for id, b := range l.boxes {
		if b.owner == w.id && b.live {
			mine = append(mine, id)
		}
	}
	var snaps []string
	for id, sn := range l.snaps {
		if sn.owner == w.id && !sn.deleted && !sn.deleting {
			snaps = append(snaps, id)
		}
	}
	l.mu.Unlock()
	// Map order is random, but not the seed's: sort for replays.
	slices.Sort(mine)
	slices.Sort(snaps)
	pick := func(s []string) string { return s[w.rng.IntN(len(s))] }
	egress := api.EgressNone
	if w.rng.IntN(2) == 0 {
		egress = api.EgressRestricted
	}
	if len(mine) == 0 || (len(mine) < crashMaxLive && w.rng.IntN(5) == 0) {
		snap := ""
		if len(snaps) > 0 && w.rng.IntN(3) == 0 {
			snap = pick(snaps)
		}
		return noAnswer(l.create(w.c, w.id, egress, snap))
	}
	id := pick(mine)
	l.mu.Lock()
	paused := l.boxes[id].paused
	l.mu.Unlock()
	op := w.rng.IntN(100)
	switch {
	case op < 15:
		return noAnswer(l.terminate(w.c, id))
	case paused || op < 25:
		return w.pause(id, !paused)
	case op < 55:
		return w.exec(id, "echo "+token, token+"\n", 0)
	case op < 65:
		ms := 200 + w.rng.IntN(1300)
		return w.exec(id, fmt.Sprintf("sleep %d.%03d; echo %s; exit 3", ms/1000, ms%1000, token), token+"\n", 3)
	case op < 80:
		return w.snapshot(id, token)
	case op < 88 && len(snaps) > 0:
		return w.restore(id, pick(snaps))
	case op < 93 && len(snaps) > 0:
		return w.deleteSnapshot(pick(snaps))
	case len(mine) < crashMaxLive:
		return w.fork(id)
	default:
		return w.exec(id, "echo "+token, token+"\n", 0)
	}
}

// noAnswer says whether err is an answer (nil or the daemon's error) rather than a broken
// connection.
func noAnswer(err error) bool {
	var ce *client.Error
	return err == nil || errors.As(err, &ce)
}

func (w *crashWorker) pause(id string, pause bool) bool {
	op, do := "resume", w.c.Resume
	if pause {
		op, do = "pause", w.c.Pause
	}
	_, err := do(bg(), id)
	w.l.answered(op+" "+id, err, func() { w.l.boxes[id].paused = pause })
	return noAnswer(err)
}

// exec runs script in id; an answer must be exit with stdout.
func (w *crashWorker) exec(id, script, stdout string, exit int) bool {
	r, err := w.c.Exec(bg(), id, api.ExecRequest{Command: api.Shell(script)})
	if err == nil && (r.ExitCode != exit || r.Stdout != stdout) {
		w.l.t.Errorf("round %d: exec %q in %s: %+v", w.l.round, script, id, r)
	}
	w.l.answered("exec in "+id, err, func() {
		w.l.execs = append(w.l.execs, crashExec{sandbox: id, id: r.ExecutionID, stdout: r.Stdout, exit: r.ExitCode})
	})
	return noAnswer(err)
}

// snapshot writes token to /workspace/m and snapshots id.
func (w *crashWorker) snapshot(id, token string) bool {
	l := w.l
	l.mu.Lock()
	l.boxes[id].marker = "" // unknown until the write is acknowledged
	l.mu.Unlock()
	if !w.exec(id, "echo "+token+" > /workspace/m", "", 0) {
		return false
	}
	l.mu.Lock()
	l.boxes[id].marker = token
	l.mu.Unlock()
	sn, err := w.c.Snapshot(bg(), id, api.SnapshotRequest{Name: token})
	l.answered("snapshot "+id, err, func() { l.snaps[sn.ID] = &crashSnap{owner: w.id, acked: true, marker: token} })
	return noAnswer(err)
}

// restore restores snapshot snap into id.
func (w *crashWorker) restore(id, snap string) bool {
	l := w.l
	l.mu.Lock()
	l.boxes[id].marker = "" // unknown until the restore is acknowledged
	l.mu.Unlock()
	_, err := w.c.Restore(bg(), id, snap)
	l.answered("restore "+snap+" into "+id, err, func() {
		l.boxes[id].marker = l.snaps[snap].marker
		l.boxes[id].paused = false
	})
	return noAnswer(err)
}

// deleteSnapshot deletes snapshot snap.
func (w *crashWorker) deleteSnapshot(snap string) bool {
	l := w.l
	_, err := w.c.DeleteSnapshot(bg(), snap)
	if !l.answered("snapdelete "+snap, err, func() { l.snaps[snap].deleted = true }) {
		l.mu.Lock()
		l.snaps[snap].deleting = true
		l.mu.Unlock()
	}
	return noAnswer(err)
}

// fork forks id once: a snapshot and a sandbox, both the worker's.
func (w *crashWorker) fork(id string) bool {
	l := w.l
	f, err := w.c.Fork(bg(), id, api.ForkRequest{Count: 1})
	l.answered("fork "+id, err, func() {
		marker := l.boxes[id].marker
		l.snaps[f.Snapshot.ID] = &crashSnap{owner: w.id, acked: true, marker: marker}
		for _, sb := range f.Sandboxes {
			l.boxes[sb.ID] = &crashBox{owner: w.id, acked: true, live: true, marker: marker}
		}
	})
	return noAnswer(err)
}

// verify checks, after a restart, that the record and the host agree on every sandbox and that
// every acknowledged operation holds; it finishes every DELETE that got no answer.
func (l *crashLedger) verify(c *client.Client) {
	t := l.t
	l.mergeRanges() // adopted sandboxes' ranges, now the new daemon's
	all, err := c.List(bg(), client.ListOptions{})
	if err != nil {
		t.Fatalf("round %d: list after the restart: %v", l.round, err)
	}
	status := map[string]api.Sandbox{}
	var ids []string
	l.mu.Lock()
	for _, sb := range all {
		status[sb.ID] = sb
		ids = append(ids, sb.ID)
		if l.boxes[sb.ID] == nil { // made by a create that got no answer
			l.boxes[sb.ID] = &crashBox{owner: -1, deleting: true}
		}
	}
	for id, b := range l.boxes {
		if _, ok := status[id]; !ok {
			t.Errorf("round %d: sandbox %s is gone after the restart (acknowledged create: %v)", l.round, id, b.acked)
		}
	}
	l.mu.Unlock()

	if v := len(alkLinks(t, l.hut)); v > l.veths {
		l.veths = v
	}
	forEach(ids, func(id string) { l.verifyBox(c, status[id]) })
	forEach(ids, func(id string) { l.verifyExecs(c, id) })
	l.verifySnapshots(c)
}

// verifyBox checks sandbox sb (as listed after a restart) against the ledger and the host, and
// retries a DELETE that got no answer.
func (l *crashLedger) verifyBox(c *client.Client, sb api.Sandbox) {
	t, round := l.t, l.round
	l.mu.Lock()
	b := *l.boxes[sb.ID]
	ranges := maps.Clone(l.ranges)
	l.mu.Unlock()
	left := func() []string { return sandboxLeft(l.dir, sb.ID, ranges) }
	live := false
	switch sb.Status {
	case api.StatusReady, api.StatusRunning, api.StatusPaused:
		live = true
		if b.deleted {
			t.Errorf("round %d: %s: its DELETE was acknowledged, but it is %s after the restart", round, sb.ID, sb.Status)
		}
		if sb.Status == api.StatusPaused {
			if _, err := c.Resume(bg(), sb.ID); err != nil {
				t.Errorf("round %d: resume %s, adopted paused: %v", round, sb.ID, err)
			}
		}
		res, err := c.Exec(bg(), sb.ID, api.ExecRequest{Command: api.Shell("cat /workspace/m 2>/dev/null; echo alive")})
		if err != nil || !strings.HasSuffix(res.Stdout, "alive\n") {
			t.Errorf("round %d: %s is %s after the restart, but not usable: %+v %v", round, sb.ID, sb.Status, res, err)
		} else if b.marker != "" && res.Stdout != b.marker+"\nalive\n" {
			t.Errorf("round %d: %s holds %q, want %q", round, sb.ID, res.Stdout, b.marker)
		}
	case api.StatusTerminated, api.StatusFailed, api.StatusCompleted:
		if sb.Reason == "" {
			t.Errorf("round %d: %s is %s with no reason", round, sb.ID, sb.Status)
		}
		if b.deleted && sb.Status != api.StatusTerminated {
			t.Errorf("round %d: %s: its DELETE was acknowledged, but it is %s (%s)", round, sb.ID, sb.Status, sb.Reason)
		}
		if l := left(); len(l) > 0 {
			t.Errorf("round %d: %s is %s (%s) after the restart, but the host still has %v", round, sb.ID, sb.Status, sb.Reason, l)
		}
		if b.acked && !b.deleted && !b.deleting {
			t.Logf("round %d: %s ended %s (%s) though never deleted", round, sb.ID, sb.Status, sb.Reason)
		}
	default:
		t.Errorf("round %d: %s is %s after the restart", round, sb.ID, sb.Status)
	}
	if b.deleting {
		// A retried DELETE finishes what the first began, or does it all.
		got, err := c.Terminate(bg(), sb.ID)
		var ce *client.Error
		switch {
		case err == nil && got.Status != api.StatusTerminated:
			t.Errorf("round %d: retried DELETE of %s: %s", round, sb.ID, got.Status)
		case err != nil && !(errors.As(err, &ce) && ce.StatusCode == 409 && ce.Status == api.StatusTerminated):
			t.Errorf("round %d: retried DELETE of %s: %v", round, sb.ID, err)
		}
		if l := left(); len(l) > 0 {
			t.Errorf("round %d: after the retried DELETE of %s the host still has %v", round, sb.ID, l)
		}
		live = false
	}
	l.mu.Lock()
	bb := l.boxes[sb.ID]
	bb.live = live && bb.owner >= 0
	bb.paused = false // resumed above
	if b.deleting {
		bb.deleting, bb.deleted = false, true
	}
	l.mu.Unlock()
}

// verifyExecs checks that no exec of sandbox id is running after a restart and that each
// acknowledged one is done with its result.
func (l *crashLedger) verifyExecs(c *client.Client, id string) {
	t, round := l.t, l.round
	execs, err := c.Execs(bg(), id)
	if err != nil {
		t.Errorf("round %d: execs of %s: %v", round, id, err)
		return
	}
	got := map[string]api.Execution{}
	for _, e := range execs {
		got[e.ID] = e
		if e.Status == api.ExecRunning {
			t.Errorf("round %d: exec %s of %s is running after the restart", round, e.ID, id)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.execs {
		if e.sandbox != id {
			continue
		}
		g, ok := got[e.id]
		if !ok || g.Status != api.ExecDone || g.Result == nil || g.Result.ExitCode != e.exit || g.Result.Stdout != e.stdout {
			t.Errorf("round %d: acknowledged exec %s of %s (exit %d, %q) is recorded as %+v", round, e.id, id, e.exit, e.stdout, g)
		}
	}
}

// verifySnapshots checks that every acknowledged snapshot is listed and no deleted one is, and
// that each listed one not yet tried restores: a sandbox made from it holds its marker. A
// DELETE of a snapshot that got no answer is retried.
func (l *crashLedger) verifySnapshots(c *client.Client) {
	t, round := l.t, l.round
	list, err := c.Snapshots(bg(), "")
	if err != nil {
		t.Errorf("round %d: list snapshots: %v", round, err)
		return
	}
	l.mu.Lock()
	listed := map[string]bool{}
	for _, s := range list {
		listed[s.ID] = true
		if l.snaps[s.ID] == nil { // a snapshot that got no answer
			l.snaps[s.ID] = &crashSnap{owner: -1}
		}
	}
	var try []string
	for id, s := range l.snaps {
		switch {
		case s.deleted && listed[id]:
			t.Errorf("round %d: snapshot %s is listed after the restart, but its DELETE was acknowledged", round, id)
		case s.acked && !s.deleted && !s.deleting && !listed[id]:
			t.Errorf("round %d: acknowledged snapshot %s is not listed after the restart", round, id)
		case listed[id] && !s.verified:
			try = append(try, id)
		}
	}
	l.mu.Unlock()
	forEach(try, func(id string) {
		l.mu.Lock()
		s := l.snaps[id]
		marker := s.marker
		l.mu.Unlock()
		sb, err := c.Create(bg(), api.Spec{FromSnapshot: id, Network: api.Network{EgressPolicy: api.EgressNone}})
		if err != nil {
			t.Errorf("round %d: create from snapshot %s: %v", round, id, err)
			return
		}
		res, err := c.Exec(bg(), sb.ID, api.ExecRequest{Command: api.Shell("cat /workspace/m")})
		if err != nil || (marker != "" && res.Stdout != marker+"\n") {
			t.Errorf("round %d: sandbox from snapshot %s: %+v %v, want %q", round, id, res, err, marker)
		}
		l.mu.Lock()
		l.boxes[sb.ID] = &crashBox{owner: -1, acked: true}
		s.verified = true
		l.mu.Unlock()
		if _, err := c.Terminate(bg(), sb.ID); err != nil {
			t.Errorf("round %d: terminate the sandbox from snapshot %s: %v", round, id, err)
		}
		l.mu.Lock()
		l.boxes[sb.ID].deleted = true
		l.mu.Unlock()
	})
	l.mu.Lock()
	var retry []string
	for id, s := range l.snaps {
		if s.deleting {
			if listed[id] {
				retry = append(retry, id)
			} else {
				s.deleting, s.deleted = false, true
			}
		}
	}
	l.mu.Unlock()
	for _, id := range retry {
		if _, err := c.DeleteSnapshot(bg(), id); err != nil {
			t.Errorf("round %d: retried DELETE of snapshot %s: %v", round, id, err)
			continue
		}
		l.mu.Lock()
		l.snaps[id].deleting, l.snaps[id].deleted = false, true
		l.mu.Unlock()
	}
}

// leftovers lists what the instance holds on the host: its sandboxes' processes, cgroups and uid
// ranges, mounts under its data dir, socket files in it, veths and nftables tables in its
// network namespace, and the network namespaces of its sandboxes.
func (l *crashLedger) leftovers() []string {
	out := append(instanceLeaks(l.dir), runSockets(l.dir)...)
	out = append(out, mountinfo.Under(l.dir)...)
	out = append(out, mountinfo.Under(levels.ContainerStateDir(l.dir))...)
	_ = filepath.WalkDir(l.dir, func(p string, e fs.DirEntry, err error) error { // fn returns nil, so does WalkDir
		if err == nil && e.Type()&fs.ModeSocket != 0 {
			out = append(out, "socket "+p)
		}
		return nil
	})
	for _, v := range alkLinks(l.t, l.hut) {
		out = append(out, "veth "+v)
	}
	out = append(out, nftTables(l.hut)...)
	l.mu.Lock()
	defer l.mu.Unlock()
	inos := map[uint64]bool{}
	for _, ino := range l.netns {
		inos[ino] = true
	}
	held := netnsHoldersOf(inos)
	for cookie, ino := range l.netns {
		for _, h := range held[ino] {
			if c, err := netnsCookie(h); err == nil && c == cookie {
				out = append(out, fmt.Sprintf("network namespace net:[%d] held by %s", ino, h))
			}
		}
	}
	return out
}

// nftTables lists the nftables tables in the network namespace at path.
func nftTables(path string) []string {
	ns, err := os.Open(path)
	if err != nil {
		return []string{"nftables: " + err.Error()}
	}
	defer ns.Close()
	conn, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return []string{"nftables: " + err.Error()}
	}
	defer func() { _ = conn.CloseLasting() }() // only listed: nothing to lose
	tables, err := conn.ListTables()
	if err != nil {
		return []string{"nftables: " + err.Error()}
	}
	var out []string
	for _, tb := range tables {
		out = append(out, "nftables table "+tb.Name)
	}
	return out
}

// unusedBlobs lists the blobs in the snapshot store of the airlock on dataDir that none of snaps
// (every snapshot there is) uses, and what is left in its scratch directory.
func unusedBlobs(dataDir string, snaps []api.Snapshot) []string {
	used := map[string]bool{}
	for _, s := range snaps {
		used[strings.TrimPrefix(s.Digest, "sha256:")] = true
	}
	var out []string
	blobs, _ := os.ReadDir(filepath.Join(dataDir, "snapshots", "blobs", "sha256"))
	for _, b := range blobs {
		if !used[b.Name()] {
			out = append(out, "unused snapshot blob "+b.Name())
		}
	}
	tmp, _ := os.ReadDir(filepath.Join(dataDir, "snapshots", "tmp"))
	for _, e := range tmp {
		out = append(out, "snapshot scratch "+e.Name())
	}
	return out
}
