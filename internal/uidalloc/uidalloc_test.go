package uidalloc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/testutil"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// testBase is far above any pool airlock uses by default, so that no real sandbox runs there.
const testBase = 60000 * uidalloc.Size

func owner(n int) uidalloc.Owner {
	return uidalloc.Owner{Instance: "test", Level: "process", Sandbox: fmt.Sprintf("sbx_%d", n)}
}

func newPool(t *testing.T, ranges int) *uidalloc.Pool {
	t.Helper()
	p, err := uidalloc.New(t.TempDir(), testBase, ranges)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// deadRecord writes the record of range block for o as an airlock process that is gone left it.
func deadRecord(t *testing.T, p *uidalloc.Pool, block int, o uidalloc.Owner) uidalloc.Range {
	t.Helper()
	r := uidalloc.Range{Block: block}
	b, _ := json.Marshal(uidalloc.Record{Range: r, Owner: o, Pid: 1 << 30, Start: 1})
	if err := os.MkdirAll(p.Dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.Dir(), strconv.Itoa(block)), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name   string
		base   uint32
		ranges int
		first  uint32 // of the only range of a pool of one, when valid
		ok     bool
	}{
		{"aligned", 30518 * uidalloc.Size, 1, 30518 * uidalloc.Size, true},
		{"rounded up to a block", 2_000_000_000, 1, 30518 * uidalloc.Size, true},
		{"host ids 0-65535 never", 0, 1, 0, false},
		{"no ranges", testBase, 0, 0, false},
		{"past 2^32-1", 65000 * uidalloc.Size, 600, 0, false},
		{"the last usable block", 65534 * uidalloc.Size, 1, 65534 * uidalloc.Size, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := uidalloc.New(t.TempDir(), tc.base, tc.ranges)
			if (err == nil) != tc.ok {
				t.Fatalf("New(%d, %d): %v, want ok %v", tc.base, tc.ranges, err, tc.ok)
			}
			if !tc.ok {
				return
			}
			r, err := p.Allocate(owner(1))
			if err != nil || r.First() != tc.first {
				t.Fatalf("Allocate: %v (first %d), %v; want first %d", r, r.First(), err, tc.first)
			}
		})
	}
}

func TestAllocateDistinctThenExhausted(t *testing.T) {
	p := newPool(t, 8)
	seen := map[int]bool{}
	for i := range 8 {
		r, err := p.Allocate(owner(i))
		if err != nil {
			t.Fatal(err)
		}
		if seen[r.Block] || r.First() < testBase || r.First() >= testBase+8*uidalloc.Size {
			t.Fatalf("range %v: taken twice or outside the pool", r)
		}
		seen[r.Block] = true
	}
	_, err := p.Allocate(owner(9))
	if !errors.Is(err, uidalloc.ErrExhausted) || !errors.Is(err, errdefs.ErrServiceUnavailable) {
		t.Fatalf("9th allocation of 8: %v, want ErrExhausted (service unavailable)", err)
	}
	if !strings.Contains(err.Error(), "8 ranges from host id") {
		t.Errorf("the error does not say which pool: %v", err)
	}
}

func TestRelease(t *testing.T) {
	p := newPool(t, 1)
	r, err := p.Allocate(owner(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		o       uidalloc.Owner
		wantErr error
		freed   bool
	}{
		{"another sandbox's", owner(2), errdefs.ErrConflict, false},
		{"another airlock's", uidalloc.Owner{Instance: "other", Level: "process", Sandbox: "sbx_1"}, errdefs.ErrConflict, false},
		{"its own", owner(1), nil, true},
		{"again", owner(1), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Release(r, tc.o)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Release: %v, want %v", err, tc.wantErr)
			}
			if got := len(p.Owned(owner(1))) == 0; got != tc.freed {
				t.Fatalf("freed %v, want %v", got, tc.freed)
			}
		})
	}
	if r2, err := p.Allocate(owner(3)); err != nil || r2 != r {
		t.Fatalf("the freed range is not handed out again: %v, %v", r2, err)
	}
}

func TestConcurrentGoroutines(t *testing.T) {
	const workers, each = 8, 16
	p := newPool(t, workers*each)
	var mu sync.Mutex
	got := map[int]string{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				o := owner(w*each + i)
				r, err := p.Allocate(o)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if prev, ok := got[r.Block]; ok {
					t.Errorf("range %v given to %s and %s", r, prev, o.Sandbox)
				}
				got[r.Block] = o.Sandbox
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != workers*each {
		t.Fatalf("%d ranges, want %d", len(got), workers*each)
	}
	if _, err := p.Allocate(owner(-1)); !errors.Is(err, uidalloc.ErrExhausted) {
		t.Fatalf("a full pool allocated: %v", err)
	}
}

// helperEnv makes the test binary a helper process that allocates from the pool in that
// directory and prints the blocks it got.
const helperEnv = "UIDALLOC_TEST_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		p, err := uidalloc.New(dir, testBase, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for i := range 16 {
			r, err := p.Allocate(uidalloc.Owner{Instance: "helper", Level: "process", Sandbox: fmt.Sprintf("sbx_%d_%d", os.Getpid(), i)})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Println(r.Block)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestConcurrentProcesses has four processes allocate from one directory at once: no range is
// given twice. Their holders are then gone, so a sweep frees every range.
func TestConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	var cmds []*exec.Cmd
	outs := make([]strings.Builder, 4)
	for i := range outs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir)
		cmd.Stdout, cmd.Stderr = &outs[i], os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, o := range outs {
		for _, b := range strings.Fields(o.String()) {
			if seen[b] {
				t.Fatalf("block %s given to two processes", b)
			}
			seen[b] = true
		}
	}
	if len(seen) != 64 {
		t.Fatalf("%d ranges, want 64", len(seen))
	}
	p, err := uidalloc.New(dir, testBase, 64)
	if err != nil {
		t.Fatal(err)
	}
	if freed := p.Sweep(); len(freed) != 64 {
		t.Fatalf("sweep freed %d ranges of gone processes, want 64", len(freed))
	}
}

func TestSweep(t *testing.T) {
	p := newPool(t, 8)
	hold := filepath.Join(t.TempDir(), "bundle")
	if err := os.Mkdir(hold, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := deadRecord(t, p, 60000+1, owner(1))
	held := deadRecord(t, p, 60000+2, uidalloc.Owner{Instance: "test", Level: "container", Sandbox: "sbx_2", Hold: hold})
	gone := deadRecord(t, p, 60000+3, uidalloc.Owner{Instance: "test", Level: "container", Sandbox: "sbx_3", Hold: hold + "-gone"})
	mine, err := p.Allocate(owner(0)) // held by this process, which runs
	if err != nil {
		t.Fatal(err)
	}
	if freed, want := p.Sweep(), []uidalloc.Range{stale, gone}; fmt.Sprint(freed) != fmt.Sprint(want) {
		t.Fatalf("swept %v, want %v", freed, want)
	}
	for _, r := range []uidalloc.Range{mine, held} {
		if len(p.Records(func(rec uidalloc.Record) bool { return rec.Range == r })) != 1 {
			t.Errorf("range %v was swept while in use", r)
		}
	}
}

// TestSweepKeepsRunning: a range whose holder is gone stays while a process runs as one of its
// uids (an adoptable sandbox in its grace).
func TestSweepKeepsRunning(t *testing.T) {
	testutil.RequiresRoot(t, "starts a process as a uid of the range")
	p := newPool(t, 8)
	r := deadRecord(t, p, 60000+4, owner(4))
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: r.First() + 1000, Gid: r.First() + 1000}}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	if freed := p.Sweep(); len(freed) != 0 {
		t.Fatalf("swept %v while a process runs in it", freed)
	}
	if err := sleep.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = sleep.Wait() // killed: its error says so
	if freed := p.Sweep(); len(freed) != 1 || freed[0] != r {
		t.Fatalf("swept %v once the process was gone, want %v", freed, r)
	}
}

func TestAdopt(t *testing.T) {
	p := newPool(t, 8)
	r := deadRecord(t, p, 60000+5, owner(5))
	if err := p.Adopt(r, owner(6)); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("another sandbox adopted the range: %v", err)
	}
	if err := p.Adopt(r, owner(5)); err != nil {
		t.Fatal(err)
	}
	recs := p.Records(func(rec uidalloc.Record) bool { return rec.Range == r })
	if len(recs) != 1 || recs[0].Pid != os.Getpid() || recs[0].Sandbox != "sbx_5" {
		t.Fatalf("after Adopt: %+v, want held by this process for sbx_5", recs)
	}
	if freed := p.Sweep(); len(freed) != 0 {
		t.Fatalf("an adopted range was swept: %v", freed)
	}
	// A record the directory lost (it is a tmpfs) is made again.
	os.Remove(filepath.Join(p.Dir(), strconv.Itoa(r.Block)))
	if err := p.Adopt(r, owner(5)); err != nil || len(p.Owned(owner(5))) != 1 {
		t.Fatalf("re-adopting a lost record: %v, owned %v", err, p.Owned(owner(5)))
	}
}

// TestDirModes: the records are root's alone, and the directories made above them stay
// traversable (runc's user-namespace root walks /run/airlock to the container level's bundles).
func TestDirModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "airlock", "uids")
	p, err := uidalloc.New(dir, testBase, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Allocate(owner(1)); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Dir(dir): 0o711, filepath.Dir(filepath.Dir(dir)): 0o711} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
}
