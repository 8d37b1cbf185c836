package process_test

import (
	"context"
	"testing"

	"github.com/airlockrun/airlock/internal/sandbox"
)

// BenchmarkExecTrue is the driver's share of an exec round trip: /bin/true into a ready sandbox,
// output captured as the daemon's sync API does. With AIRLOCK_LOG=debug the driver logs each
// exec's phases ("exec done": exited, accounted).
func BenchmarkExecTrue(b *testing.B) {
	d := newDriver(b)
	sb := newSandbox(b, d, sandbox.Spec{})
	req := sandbox.ExecRequest{Command: []string{"/bin/true"}, Capture: true}
	for b.Loop() {
		req.ID = sandbox.NewID("exec_")
		res, err := sb.Exec(context.Background(), req)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v, %v", res, err)
		}
	}
}
