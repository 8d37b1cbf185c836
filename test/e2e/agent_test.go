package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/image/imagetest"
)

// Asynchronous provisioning and the agent of a sandbox (SPEC §5, seed 000's lifecycle), against a
// real airlock serve at the process level.

// waitStatus polls sandbox id until it is want, failing t if it passes through a status not in
// via first, or takes a minute. It returns the sandbox as last polled.
func waitStatus(t *testing.T, c *client.Client, id, want string, via ...string) api.Sandbox {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		sb, err := c.Get(bg(), id)
		switch {
		case err != nil:
			t.Fatal(err)
		case sb.Status == want:
			return sb
		case !slices.Contains(via, sb.Status):
			t.Fatalf("sandbox %s is %s (%s), want %s (through %v)", id, sb.Status, sb.Reason, want, via)
		case time.Now().After(deadline):
			t.Fatalf("sandbox %s still %s after a minute, want %s", id, sb.Status, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProvisionPolled: a create answers 202 provisioning at once, a poller sees it become ready;
// an exec sent right after the answer waits for it and runs; ?wait=true answers 201 ready; the
// CLI's create waits, --no-wait does not.
func TestProvisionPolled(t *testing.T) {
	check := leakCheck(t)
	d, c, key := newDaemonConfig(t, `{`+processDefault+`}`)
	status, sb, raw := seedCall(t, d, key, "POST", "/api/v1/sandboxes", `{"resources": {"memoryMb": 256, "diskMb": 256}}`)
	if status != http.StatusAccepted || field(sb, "data.status") != api.StatusProvisioning {
		t.Fatalf("create: %d %s, want 202 provisioning", status, raw)
	}
	id := field(sb, "data.id").(string)
	if out := shOK(t, c, id, "echo right-away"); out != "right-away" {
		t.Errorf("an exec sent at once: %q", out)
	}
	waitStatus(t, c, id, api.StatusRunning, api.StatusProvisioning, api.StatusReady)

	status, sb, raw = seedCall(t, d, key, "POST", "/api/v1/sandboxes?wait=true", `{"resources": {"memoryMb": 256, "diskMb": 256}}`)
	if status != http.StatusCreated || field(sb, "data.status") != api.StatusReady {
		t.Fatalf("create with wait=true: %d %s, want 201 ready", status, raw)
	}
	two := field(sb, "data.id").(string)
	// The poller of an asynchronous create sees provisioning, then ready.
	async, err := c.CreateAsync(bg(), smallSpec())
	if err != nil || async.Status != api.StatusProvisioning {
		t.Fatalf("CreateAsync: %s %v", async.Status, err)
	}
	waitStatus(t, c, async.ID, api.StatusReady, api.StatusProvisioning)

	r := d.cli(t, key, nil, "create", "--json", "--memory", "256M")
	if r.code != 0 || !strings.Contains(r.stdout, `"status": "ready"`) {
		t.Errorf("airlock create: %+v", r)
	}
	r = d.cli(t, key, nil, "create", "--json", "--no-wait", "--memory", "256M")
	if r.code != 0 || !strings.Contains(r.stdout, `"status": "provisioning"`) {
		t.Errorf("airlock create --no-wait: %+v", r)
	}
	for _, s := range []string{id, two, async.ID} {
		if _, err := c.Terminate(bg(), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.stop(); err != nil {
		t.Error(err)
	}
	check()
}

// TestProvisionFails: a create of an image that does not exist answers 202 provisioning, then
// ends failed with the reason, seen by a poller and in its events; an exec waiting for it is a
// 409; a create with wait=true answers the error.
func TestProvisionFails(t *testing.T) {
	host := imagetest.Registry(t) // on loopback, holding nothing
	d, c, key := newDaemonConfig(t, `{`+processDefault+`, "images": {"allowPrivateNetworks": true, "allowed": ["`+host+`/*"]}}`)
	body := `{"image": "` + host + `/e2e/nope:1", "resources": {"memoryMb": 256, "diskMb": 256}}`
	status, sb, raw := seedCall(t, d, key, "POST", "/api/v1/sandboxes", body)
	if status != http.StatusAccepted || field(sb, "data.status") != api.StatusProvisioning {
		t.Fatalf("create: %d %s, want 202 provisioning", status, raw)
	}
	id := field(sb, "data.id").(string)
	_, err := c.Exec(bg(), id, api.ExecRequest{Command: api.Shell("true")})
	if ce := clientErr(t, err); ce.StatusCode != http.StatusConflict || !strings.Contains(ce.Message, "nope") {
		t.Errorf("an exec that waited for a failed provisioning: %+v", ce)
	}
	got := waitStatus(t, c, id, api.StatusFailed, api.StatusProvisioning)
	if !strings.Contains(got.Reason, "nope") {
		t.Errorf("failed with reason %q: it does not name the image", got.Reason)
	}
	page, err := c.Events(bg(), id, client.EventOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var tos []any
	for _, e := range page.Events {
		if e.Type == api.EventSandboxStatus {
			tos = append(tos, e.Data["to"])
		}
	}
	if !slices.Contains(tos, any(api.StatusFailed)) {
		t.Errorf("status events %v: no failed", tos)
	}
	status, _, raw = seedCall(t, d, key, "POST", "/api/v1/sandboxes?wait=true", body)
	if status < 400 || !strings.Contains(string(raw), "nope") {
		t.Errorf("create with wait=true: %d %s, want the error", status, raw)
	}
}

// TestAgentLifecycle runs a sandbox through its agent, with a webhook on loopback: running while
// it runs, an exec beside it, its stdin written, its output in the followed log, and its exit
// ending the sandbox completed (0) or failed with reason agent_exit (3), each transition
// delivered to the webhook (the code in the last one's data); then terminated. An image's
// entrypoint is the agent of a sandbox that names none.
func TestAgentLifecycle(t *testing.T) {
	check := leakCheck(t)
	const secret = "e2e-agent-webhook-secret-0123456789"
	rc := newHookReceiver(t)
	rc.expect("/agent", secret)
	registry := imagetest.Registry(t)
	ref := imagetest.Push(t, registry, "e2e/agent:1", imagetest.Busybox(t),
		v1.Config{Env: []string{"PATH=/bin"}, Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"echo from-the-entrypoint; exit 0"}})
	d, c, _ := newDaemonConfig(t, `{`+processDefault+`, "webhooks": {"allowPrivateNetworks": true, "timeoutSeconds": 5},
		"images": {"allowPrivateNetworks": true, "allowed": ["`+registry+`/*"]}}`)
	if _, err := c.CreateWebhook(bg(), api.WebhookRequest{URL: rc.srv.URL + "/agent", Secret: secret}); err != nil {
		t.Fatal(err)
	}
	script := `echo agent-up; while read -r l; do if [ "$l" = done ]; then echo bye >&2; exit "$CODE"; fi; echo "got:$l"; done`
	for _, tc := range []struct {
		code int
		end  string
	}{{0, api.StatusCompleted}, {3, api.StatusFailed}} {
		t.Run(fmt.Sprintf("exit %d", tc.code), func(t *testing.T) {
			spec := smallSpec()
			spec.Agent = &api.Agent{Command: api.Shell(script), Env: map[string]string{"CODE": fmt.Sprint(tc.code)}}
			sb, err := c.Create(bg(), spec)
			if err != nil || sb.Status != api.StatusReady {
				t.Fatalf("create: %s %v", sb.Status, err)
			}
			logs := followLogs(c, sb.ID)
			if sb, err = c.Start(bg(), sb.ID); err != nil || sb.Status != api.StatusRunning {
				t.Fatalf("start: %s %v", sb.Status, err)
			}
			if out := shOK(t, c, sb.ID, "echo beside"); out != "beside" {
				t.Errorf("an exec beside the agent: %q", out)
			}
			if got, _ := c.Get(bg(), sb.ID); got.Status != api.StatusRunning {
				t.Errorf("while the agent runs: %s, want running", got.Status)
			}
			if _, err := c.AgentStdin(bg(), sb.ID, []byte("hello\n"), false); err != nil {
				t.Fatal(err)
			}
			if _, err := c.AgentStdin(bg(), sb.ID, []byte("done\n"), true); err != nil {
				t.Fatal(err)
			}
			got := waitStatus(t, c, sb.ID, tc.end, api.StatusRunning)
			if got.Reason != "agent_exit" {
				t.Errorf("ended %s with reason %q, want agent_exit", got.Status, got.Reason)
			}
			out := logs.wait(t)
			for _, want := range []string{"stdout:agent-up", "stdout:got:hello", "stderr:bye", "stdout:beside"} {
				if !strings.Contains(out, want) {
					t.Errorf("the followed log has no %q:\n%s", want, out)
				}
			}
			if _, err := c.Exec(bg(), sb.ID, api.ExecRequest{Command: api.Shell("true")}); clientErr(t, err).StatusCode != http.StatusConflict {
				t.Errorf("exec in a %s sandbox: %v, want 409", tc.end, err)
			}
			if got, err := c.Terminate(bg(), sb.ID); err != nil || got.Status != api.StatusTerminated {
				t.Fatalf("terminate: %s %v", got.Status, err)
			}
			deliveries := waitHooks(t, rc, "/agent", sb.ID, api.StatusTerminated)
			var path []string
			for _, p := range deliveries {
				if p.Event.SandboxID == sb.ID && p.Event.Type == api.EventSandboxStatus {
					path = append(path, p.Event.Data["to"].(string))
					if p.Event.Data["to"] == tc.end && fmt.Sprint(p.Event.Data["exitCode"]) != fmt.Sprint(tc.code) {
						t.Errorf("the %s delivery: %v, want exitCode %d", tc.end, p.Event.Data, tc.code)
					}
				}
			}
			if want := []string{"provisioning", "ready", "running", tc.end, "terminated"}; !slices.Equal(path, want) {
				t.Errorf("webhook deliveries of the transitions: %q, want %q", path, want)
			}
		})
	}

	t.Run("image entrypoint", func(t *testing.T) {
		spec := smallSpec()
		spec.Image, spec.Start = ref, true
		sb, err := c.Create(bg(), spec)
		if err != nil {
			t.Fatal(err)
		}
		got := waitStatus(t, c, sb.ID, api.StatusCompleted, api.StatusRunning, api.StatusReady)
		var out strings.Builder
		if err := c.Logs(bg(), got.ID, client.LogOptions{}, func(e api.LogEntry) error { out.WriteString(e.Data); return nil }); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "from-the-entrypoint") {
			t.Errorf("the entrypoint's output is not in the log: %q", out.String())
		}
		terminate(bg(), t, c, sb.ID)
	})

	t.Run("no agent", func(t *testing.T) {
		sb, err := c.Create(bg(), smallSpec())
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Start(bg(), sb.ID)
		if ce := clientErr(t, err); ce.StatusCode != http.StatusConflict || ce.Field != "agent" {
			t.Errorf("start without an agent: %+v, want 409 naming agent", ce)
		}
		terminate(bg(), t, c, sb.ID)
	})
	if err := d.stop(); err != nil {
		t.Error(err)
	}
	check()
}

// followedLogs collects a sandbox's log, followed, as stream:data lines.
type followedLogs struct {
	mu   sync.Mutex
	out  strings.Builder
	done chan error
}

func followLogs(c *client.Client, id string) *followedLogs {
	l := &followedLogs{done: make(chan error, 1)}
	go func() {
		l.done <- c.Logs(bg(), id, client.LogOptions{Follow: true}, func(e api.LogEntry) error {
			if e.Stream == api.StreamStdout || e.Stream == api.StreamStderr {
				l.mu.Lock()
				for line := range strings.Lines(e.Data) {
					l.out.WriteString(e.Stream + ":" + line)
				}
				l.mu.Unlock()
			}
			return nil
		})
	}()
	return l
}

// wait waits for the followed log to end with its sandbox, and returns it.
func (l *followedLogs) wait(t *testing.T) string {
	t.Helper()
	select {
	case err := <-l.done:
		if err != nil {
			t.Errorf("follow the log: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the followed log did not end with the sandbox")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.String()
}

// waitHooks waits until rc's path got sandbox id's transition to status, and returns what it got.
func waitHooks(t *testing.T, rc *hookReceiver, path, id, status string) []api.WebhookPayload {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, bad := rc.payloads(path)
		if len(bad) > 0 {
			t.Fatalf("deliveries that do not verify: %v", bad)
		}
		if hasStatus(got, id, status) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("no webhook delivery of %s's %s in 20 s", id, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
