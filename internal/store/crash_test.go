package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
)

// crashChildEnv, set to a database path, makes the test binary run crashChild instead of the
// tests.
const crashChildEnv = "AIRLOCK_STORE_CRASH_CHILD"

// crashChild records execs into the database at path as fast as it can, printing "ack ID" after
// each FinishExec returns, until it is killed.
func crashChild(path string) {
	ctx := context.Background()
	s, err := Open(ctx, path, Options{}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		id := fmt.Sprintf("ex%d", i)
		if err := s.StartExec(ctx, api.Execution{ID: id, SandboxID: "sb", Command: []string{"n", id}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		res := api.ExecResult{ExecutionID: id, ExitCode: i % 256, Stdout: "out " + id}
		if err := s.FinishExec(ctx, id, res, time.Now()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		// os.Stdout is unbuffered: the ack leaves the process only after the record is committed.
		if _, err := fmt.Fprintf(os.Stdout, "ack %s\n", id); err != nil {
			os.Exit(2)
		}
	}
}

// TestCrashDurability kills (SIGKILL) a process in the middle of writing exec records and checks
// that every record it acknowledged is in the database, complete, in the default sync mode.
func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "airlock.db")
	s, err := Open(ctx, path, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InsertSandbox(ctx, Sandbox{ID: "sb", Tenant: "a", Status: api.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const killAfter = 500
	var acked []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		id, ok := strings.CutPrefix(sc.Text(), "ack ")
		if !ok {
			t.Fatalf("child said %q", sc.Text())
		}
		acked = append(acked, id)
		if len(acked) == killAfter {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		// Keep reading: whatever the child wrote before it died was acknowledged too.
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v; stderr: %s", err, stderr.String())
	}
	if len(acked) < killAfter {
		t.Fatalf("child acknowledged %d records before dying; want at least %d", len(acked), killAfter)
	}

	s, err = Open(ctx, path, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var check string
	if err := s.read.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
	for i, id := range acked {
		e, err := s.Exec(ctx, "sb", id)
		if err != nil {
			t.Fatalf("acknowledged exec %s: %v", id, err)
		}
		if e.Status != api.ExecDone || e.EndedAt == nil || e.Result == nil ||
			e.Result.ExitCode != i%256 || e.Result.Stdout != "out "+id || e.Command[1] != id {
			t.Fatalf("acknowledged exec %s is incomplete: %+v", id, e)
		}
	}
	// At most the one exec in flight at the kill is left running.
	if n, err := s.MarkLost(ctx); err != nil || n > 1 {
		t.Errorf("MarkLost after the crash = %d, %v; want 0 or 1", n, err)
	}
	t.Logf("%d acknowledged records survived SIGKILL", len(acked))
}
