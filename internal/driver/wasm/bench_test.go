package wasm_test

import (
	"context"
	"testing"

	"github.com/airlockrun/airlock/internal/sandbox"
)

// BenchmarkExec is a warm exec on the driver alone (no daemon): the interpreter instantiated from
// its compiled module by the sandbox's worker, started and run; make bench-wasm measures the same
// through the API. A first exec, not timed, has the worker load the interpreter.
func BenchmarkExec(b *testing.B) {
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"python", []string{"python3", "-c", "print(1)"}},
		{"node", []string{"node", "-e", "console.log(1)"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			d, _ := newDriver(b)
			sb := newSandbox(b, d, sandbox.Spec{})
			if res, err := sb.Exec(context.Background(), sandbox.ExecRequest{ID: "exec_w", Command: c.argv, Capture: true}); err != nil || res.Stdout != "1\n" {
				b.Fatalf("%+v %v", res, err)
			}
			for b.Loop() {
				res, err := sb.Exec(context.Background(), sandbox.ExecRequest{ID: "exec_b", Command: c.argv, Capture: true})
				if err != nil || res.Stdout != "1\n" {
					b.Fatalf("%+v %v", res, err)
				}
			}
		})
	}
}
