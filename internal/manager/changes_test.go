package manager

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/fsdiff"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// TestScansCoalesce: execs that end while a scan of the layer is being made share the next scan
// (a sandbox scanning its own layer, a VM under TCG, is not kept scanning one exec behind the
// other): their changes are reported once, by the first of them naming the others, and each
// exec's files are those of its batch; a lone exec still gets a scan of its own.
func TestScansCoalesce(t *testing.T) {
	st := openStore(t)
	f := drivertest.NewFake()
	var (
		mu    sync.Mutex
		scans int
	)
	hold, held := make(chan struct{}), make(chan struct{})
	f.OnLayer(func(id string) (driver.Layer, error) {
		return driver.Layer{Scanner: func(ctx context.Context) (fsdiff.Tree, error) {
			// The layer holds the files the sandbox's execs put.
			tree := fsdiff.Tree{Entries: map[string]fsdiff.Entry{}}
			for name := range f.Files(id) {
				tree.Entries["/workspace/"+name] = fsdiff.Entry{Mode: 0o100644, Size: 1}
			}
			mu.Lock()
			scans++
			n := scans
			mu.Unlock()
			if n == 2 { // the scan after the first exec: held while three more execs run
				close(held)
				<-hold
			}
			return tree, nil
		}}, nil
	})
	m := testManager(t, st, f)
	ctx := tenant.With(context.Background(), "t1")
	sb, err := m.Create(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	exec := func(i int) string {
		t.Helper()
		res, err := m.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell(fmt.Sprintf("put f%d x", i))}, Stream{})
		if err != nil {
			t.Fatal(err)
		}
		return res.ExecutionID
	}
	ids := []string{exec(0)}
	<-held
	for i := 1; i <= 3; i++ {
		ids = append(ids, exec(i))
	}
	close(hold)
	for i, id := range ids {
		created, _, ok := m.ExecFiles(ctx, sb.ID, id, 5*time.Second)
		want := []string{"/workspace/f0"}
		if i > 0 {
			want = []string{"/workspace/f1", "/workspace/f2", "/workspace/f3"}
		}
		slices.Sort(created)
		if !ok || !slices.Equal(created, want) {
			t.Errorf("exec %d's files: %v (%v), want %v", i, created, ok, want)
		}
	}
	mu.Lock()
	if scans != 3 { // before the first exec, after it, and one for the three after
		t.Errorf("%d scans, want 3", scans)
	}
	mu.Unlock()
	m.events.Flush()
	evs, err := st.Events(ctx, store.EventFilter{Tenant: "t1", SandboxID: sb.ID, TypePrefix: api.EventExecFiles})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].ExecutionID != ids[0] || evs[1].ExecutionID != ids[1] {
		t.Fatalf("exec.files events %+v, want one for exec 0 and one for exec 1", evs)
	}
	var named []string
	for _, v := range evs[1].Data["concurrentExecutions"].([]any) {
		named = append(named, v.(string))
	}
	if !slices.Contains(named, ids[2]) || !slices.Contains(named, ids[3]) {
		t.Errorf("the batch's event names %v, want %v and %v", named, ids[2], ids[3])
	}
	// Alone again: a scan of its own.
	last := exec(4)
	if created, _, ok := m.ExecFiles(ctx, sb.ID, last, 5*time.Second); !ok || !slices.Equal(created, []string{"/workspace/f4"}) {
		t.Errorf("a lone exec's files: %v (%v)", created, ok)
	}
}
