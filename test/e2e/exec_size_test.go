package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// TestDaemonLargeExec sends execs whose env, argv or stdin is about 900 KB — what fits in the
// default 1 MiB body — over HTTP and the interactive WebSocket: each runs, and the sandbox stays
// alive. What execve could never take (one string past 128 KiB) is a 413 naming the field.
func TestDaemonLargeExec(t *testing.T) {
	_, c := newDaemon(t)
	ctx := bg()
	spec := smallSpec()
	spec.Isolation = "process"
	sb, err := c.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer terminate(ctx, t, c, sb.ID)
	const parts, size = 9, 100_000
	count := api.Command{"python3", "-c", `
import os, sys
print(sum(len(a) for a in sys.argv[1:]), sum(len(v) for k, v in os.environ.items() if k.startswith("BIG")), len(sys.stdin.buffer.read()))`}
	env := map[string]string{}
	argv := append(api.Command{}, count...)
	for i := range parts {
		env[fmt.Sprintf("BIG%d", i)] = strings.Repeat(string(rune('a'+i)), size)
		argv = append(argv, strings.Repeat(string(rune('a'+i)), size))
	}
	for _, tc := range []struct {
		name string
		req  api.ExecRequest
		want string
	}{
		{"env", api.ExecRequest{Command: count, Env: env}, fmt.Sprintf("0 %d 0", parts*size)},
		{"argv", api.ExecRequest{Command: argv}, fmt.Sprintf("%d 0 0", parts*size)},
		{"stdin", api.ExecRequest{Command: count, Stdin: strings.Repeat("x", parts*size)}, fmt.Sprintf("0 0 %d", parts*size)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.Exec(ctx, sb.ID, tc.req)
			if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != tc.want {
				t.Fatalf("exit %d stdout %q stderr %.300q: %v; want %q", res.ExitCode, res.Stdout, res.Stderr, err, tc.want)
			}
		})
	}
	t.Run("websocket env", func(t *testing.T) {
		var out strings.Builder
		res, err := c.ExecInteractive(ctx, sb.ID, api.ExecStart{ExecRequest: api.ExecRequest{Command: count, Env: env}}, client.Stdio{Stdout: &out})
		if err != nil || res.ExitCode != 0 || strings.TrimSpace(out.String()) != fmt.Sprintf("0 %d 0", parts*size) {
			t.Fatalf("%+v %v, output %q", res, err, out.String())
		}
	})

	tooLong := strings.Repeat("x", 200_000)
	for _, tc := range []struct {
		name, field string
		req         api.ExecRequest
	}{
		{"one argument past 128 KiB", "command", api.ExecRequest{Command: api.Command{"echo", tooLong}}},
		{"one variable past 128 KiB", "env.HUGE", api.ExecRequest{Command: api.Shell("true"), Env: map[string]string{"HUGE": tooLong}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Exec(ctx, sb.ID, tc.req)
			if e := clientErr(t, err); e.StatusCode != 413 || e.Code != api.CodePayloadTooLarge || e.Field != tc.field {
				t.Fatalf("%+v, want 413 naming %s", e, tc.field)
			}
			_, err = c.ExecInteractive(ctx, sb.ID, api.ExecStart{ExecRequest: tc.req}, client.Stdio{})
			if e := clientErr(t, err); e.Code != api.CodePayloadTooLarge || e.Field != tc.field {
				t.Fatalf("websocket: %+v, want too large naming %s", e, tc.field)
			}
		})
	}
	if out := shOK(t, c, sb.ID, "echo alive"); out != "alive" {
		t.Fatalf("after large execs: %q", out)
	}
}
