package manager

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// TestCheckExecSize: what the API's body cap lets through either fits execve or is a 413 naming
// the field, never a command that cannot start.
func TestCheckExecSize(t *testing.T) {
	many := func(n, size int) map[string]string {
		env := map[string]string{}
		for i := range n {
			env[fmt.Sprintf("V%d", i)] = strings.Repeat("x", size)
		}
		return env
	}
	argv := func(n, size int) []string {
		out := []string{"python3"}
		for range n {
			out = append(out, strings.Repeat("x", size))
		}
		return out
	}
	for _, c := range []struct {
		name  string
		req   api.ExecRequest
		field string // "" when it is fine
	}{
		{"900 KB of env in 9 variables", api.ExecRequest{Command: []string{"env"}, Env: many(9, 100_000)}, ""},
		{"900 KB of argv in 9 arguments", api.ExecRequest{Command: argv(9, 100_000)}, ""},
		{"one argument at the kernel's limit", api.ExecRequest{Command: []string{"echo", strings.Repeat("x", maxArgString-1)}}, ""},
		{"one argument past it", api.ExecRequest{Command: []string{"echo", strings.Repeat("x", maxArgString)}}, "command"},
		{"a shell line past it", api.ExecRequest{Command: api.Shell(strings.Repeat("x", 900_000))}, "command"},
		{"one variable past it", api.ExecRequest{Command: []string{"env"}, Env: map[string]string{"BIG": strings.Repeat("x", maxArgString)}}, "env.BIG"},
		{"tiny variables whose pointers add up", api.ExecRequest{Command: []string{"env"}, Env: many(100_000, 1)}, "env"},
		{"tiny arguments whose pointers add up", api.ExecRequest{Command: argv(120_000, 1)}, "command"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkExec(&c.req)
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			fe, ok := errors.AsType[*errdefs.FieldError](err)
			if !ok || fe.Field != c.field || !errors.Is(err, errdefs.ErrTooLarge) {
				t.Fatalf("%v, want too large naming %q", err, c.field)
			}
		})
	}
}
