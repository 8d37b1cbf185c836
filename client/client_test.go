package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/client/clienttest"
)

// TestMain runs a fake daemon that the examples find through AIRLOCK_HOST, as a program would
// find the real one, and checks that no test leaves a goroutine behind.
func TestMain(m *testing.M) {
	d := clienttest.NewDaemon()
	os.Setenv("AIRLOCK_HOST", d.URL)
	os.Setenv("AIRLOCK_TOKEN", clienttest.Token)
	code := m.Run()
	d.Close()
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestNew(t *testing.T) {
	for _, c := range []struct {
		base, want string
		ok         bool
	}{
		{"http://127.0.0.1:7070", "http://127.0.0.1:7070", true},
		{"http://127.0.0.1:7070/", "http://127.0.0.1:7070", true},
		{"https://gw.example.com/airlock/", "https://gw.example.com/airlock", true},
		{"127.0.0.1:7070", "", false},
		{"ftp://host", "", false},
		{"http://", "", false},
		{"http://host/?x=1", "", false},
		{"http://user:pw@host", "", false},
	} {
		c2, err := client.New(c.base, "")
		if (err == nil) != c.ok {
			t.Errorf("New(%q): %v, want ok=%v", c.base, err, c.ok)
			continue
		}
		if c.ok && c2.BaseURL() != c.want {
			t.Errorf("New(%q).BaseURL() = %q, want %q", c.base, c2.BaseURL(), c.want)
		}
	}
}

func TestHostURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                        "http://127.0.0.1:7070",
		"  ":                      "http://127.0.0.1:7070",
		"10.0.0.2:7070":           "http://10.0.0.2:7070",
		"localhost:9000":          "http://localhost:9000",
		"https://airlock.example": "https://airlock.example",
		"http://[::1]:7070":       "http://[::1]:7070",
	} {
		if got := client.HostURL(in); got != want {
			t.Errorf("HostURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("AIRLOCK_HOST", "127.0.0.1:1234")
	t.Setenv("AIRLOCK_TOKEN", "k")
	c, err := client.FromEnv()
	if err != nil || c.BaseURL() != "http://127.0.0.1:1234" {
		t.Fatalf("FromEnv() = %v, %v", c, err)
	}
}

// recorder is a fake daemon that answers every request with one canned response and remembers
// what it was asked.
type recorder struct {
	mu      sync.Mutex // guards reqs
	reqs    []recorded
	status  int
	body    string
	headers map[string]string
}

type recorded struct {
	method, path, query, auth, contentType, body string
}

func newRecorder(t *testing.T, status int, body string) (*recorder, *client.Client) {
	t.Helper()
	rec := &recorder{status: status, body: body}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL+"/prefix", "tok", client.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return rec, c
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(b)})
	rec.mu.Unlock()
	for k, v := range rec.headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rec.status)
	_, _ = io.WriteString(w, rec.body) // a failure is the client's to see
}

func (rec *recorder) last(t *testing.T) recorded {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) == 0 {
		t.Fatal("no request reached the daemon")
	}
	return rec.reqs[len(rec.reqs)-1]
}

// TestRoutes checks that every method asks the route of the contract, with the key.
func TestRoutes(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, method, path, query string
		call                      func(c *client.Client) error
	}{
		{"health", "GET", "/healthz", "", func(c *client.Client) error { _, err := c.Health(ctx); return err }},
		{"capabilities", "GET", "/api/v1/capabilities", "", func(c *client.Client) error { _, err := c.Capabilities(ctx); return err }},
		{"create waits", "POST", "/api/v1/sandboxes", "wait=true", func(c *client.Client) error { _, err := c.Create(ctx, api.Spec{}); return err }},
		{"create async", "POST", "/api/v1/sandboxes", "", func(c *client.Client) error { _, err := c.CreateAsync(ctx, api.Spec{}); return err }},
		{"list", "GET", "/api/v1/sandboxes", "", func(c *client.Client) error { _, err := c.List(ctx, client.ListOptions{}); return err }},
		{"get", "GET", "/api/v1/sandboxes/sbx_1", "", func(c *client.Client) error { _, err := c.Get(ctx, "sbx_1"); return err }},
		{"get escapes the id", "GET", "/api/v1/sandboxes/a%2Fb", "", func(c *client.Client) error { _, err := c.Get(ctx, "a/b"); return err }},
		{"terminate", "DELETE", "/api/v1/sandboxes/sbx_1", "", func(c *client.Client) error { _, err := c.Terminate(ctx, "sbx_1"); return err }},
		{"pause", "POST", "/api/v1/sandboxes/sbx_1/pause", "", func(c *client.Client) error { _, err := c.Pause(ctx, "sbx_1"); return err }},
		{"resume", "POST", "/api/v1/sandboxes/sbx_1/resume", "", func(c *client.Client) error { _, err := c.Resume(ctx, "sbx_1"); return err }},
		{"start", "POST", "/api/v1/sandboxes/sbx_1/start", "", func(c *client.Client) error { _, err := c.Start(ctx, "sbx_1"); return err }},
		{"agent stdin", "POST", "/api/v1/sandboxes/sbx_1/agent/stdin", "", func(c *client.Client) error {
			_, err := c.AgentStdin(ctx, "sbx_1", []byte("hi\n"), false)
			return err
		}},
		{"agent stdin eof", "POST", "/api/v1/sandboxes/sbx_1/agent/stdin", "eof=true", func(c *client.Client) error {
			_, err := c.AgentStdin(ctx, "sbx_1", nil, true)
			return err
		}},
		{"exec", "POST", "/api/v1/sandboxes/sbx_1/exec", "", func(c *client.Client) error { _, err := c.Exec(ctx, "sbx_1", api.ExecRequest{}); return err }},
		{"execs", "GET", "/api/v1/sandboxes/sbx_1/execs", "", func(c *client.Client) error { _, err := c.Execs(ctx, "sbx_1"); return err }},
		{"execution", "GET", "/api/v1/sandboxes/sbx_1/execs/exec_2", "", func(c *client.Client) error { _, err := c.Execution(ctx, "sbx_1", "exec_2"); return err }},
		{"verify audit", "GET", "/api/v1/audit/verify", "", func(c *client.Client) error { _, err := c.VerifyAudit(ctx); return err }},
		{"metrics", "GET", "/api/v1/sandboxes/sbx_1/metrics", "", func(c *client.Client) error { _, err := c.Metrics(ctx, "sbx_1"); return err }},
		{"logs", "GET", "/api/v1/sandboxes/sbx_1/logs", "since=7", func(c *client.Client) error {
			return c.Logs(ctx, "sbx_1", client.LogOptions{Since: 7}, func(api.LogEntry) error { return nil })
		}},
		{"list files", "GET", "/api/v1/sandboxes/sbx_1/files/list", "path=%2Fworkspace", func(c *client.Client) error { _, err := c.ListFiles(ctx, "sbx_1", "/workspace"); return err }},
		{"stat", "GET", "/api/v1/sandboxes/sbx_1/files/stat", "path=%2Fa+b", func(c *client.Client) error { _, err := c.StatFile(ctx, "sbx_1", "/a b"); return err }},
		{"mkdir", "POST", "/api/v1/sandboxes/sbx_1/files/mkdir", "path=%2Fw%2Fx", func(c *client.Client) error { _, err := c.Mkdir(ctx, "sbx_1", "/w/x", false); return err }},
		{"mkdir -p", "POST", "/api/v1/sandboxes/sbx_1/files/mkdir", "parents=true&path=%2Fw%2Fx", func(c *client.Client) error { _, err := c.Mkdir(ctx, "sbx_1", "/w/x", true); return err }},
		{"remove", "DELETE", "/api/v1/sandboxes/sbx_1/files", "path=%2Fw", func(c *client.Client) error { return c.RemoveFile(ctx, "sbx_1", "/w", false) }},
		{"remove -r", "DELETE", "/api/v1/sandboxes/sbx_1/files", "path=%2Fw&recursive=true", func(c *client.Client) error { return c.RemoveFile(ctx, "sbx_1", "/w", true) }},
		{"write", "PUT", "/api/v1/sandboxes/sbx_1/files", "mode=0755&parents=true&path=%2Fw%2Frun.sh", func(c *client.Client) error {
			_, err := c.WriteFile(ctx, "sbx_1", "/w/run.sh", strings.NewReader("#!/bin/sh\n"), 0o755)
			return err
		}},
		{"write with the default mode", "PUT", "/api/v1/sandboxes/sbx_1/files", "mode=0644&parents=true&path=%2Fw", func(c *client.Client) error {
			_, err := c.WriteFile(ctx, "sbx_1", "/w", nil, 0)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec, cl := newRecorder(t, http.StatusOK, `{"ok":true,"data":null}`)
			if err := c.call(cl); err != nil {
				t.Fatal(err)
			}
			got := rec.last(t)
			if got.method != c.method || got.path != "/prefix"+c.path || got.query != c.query {
				t.Errorf("asked %s %s?%s, want %s /prefix%s?%s", got.method, got.path, got.query, c.method, c.path, c.query)
			}
			if got.auth != "Bearer tok" {
				t.Errorf("Authorization = %q", got.auth)
			}
		})
	}
}

func TestListQuery(t *testing.T) {
	rec, c := newRecorder(t, http.StatusOK, `{"ok":true,"data":[{"id":"sbx_1","status":"ready","isolation":"process"}]}`)
	sbs, err := c.List(context.Background(), client.ListOptions{
		Status:   []string{api.StatusReady, api.StatusRunning},
		AgentID:  "agent 7",
		Metadata: map[string]string{"team": "a=b", "env": "prod"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 1 || sbs[0].ID != "sbx_1" || sbs[0].Isolation != api.LevelProcess {
		t.Errorf("List = %+v", sbs)
	}
	want := "agentId=agent+7&metadata=env%3Dprod&metadata=team%3Da%3Db&status=ready&status=running"
	if got := rec.last(t).query; got != want {
		t.Errorf("query = %s\nwant    %s", got, want)
	}
}

func TestCreateBody(t *testing.T) {
	rec, c := newRecorder(t, http.StatusCreated, `{"ok":true,"data":{"id":"sbx_9","status":"ready","name":"n","resources":{"memoryMb":512}}}`)
	sb, err := c.Create(context.Background(), api.Spec{Name: "n", Resources: api.Resources{MemoryMB: 512}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID != "sbx_9" || sb.Name != "n" || sb.Resources.MemoryMB != 512 {
		t.Errorf("Create = %+v", sb)
	}
	got := rec.last(t)
	if got.contentType != "application/json" || !strings.Contains(got.body, `"memoryMb":512`) || !strings.Contains(got.body, `"name":"n"`) {
		t.Errorf("body %s (%s)", got.body, got.contentType)
	}
}

func TestEmptyTokenSendsNoHeader(t *testing.T) {
	rec := &recorder{status: http.StatusOK, body: `{"ok":true,"data":{"status":"ok"}}`}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	c, _ := client.New(srv.URL, "", client.WithHTTPClient(srv.Client()))
	if _, err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := rec.last(t).auth; a != "" {
		t.Errorf("Authorization = %q, want none", a)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   client.Error
		is     error
	}{
		{"field error", 400, `{"ok":false,"error":{"code":"invalid_argument","message":"must be between 16 and 32768 MiB","field":"resources.memoryMb"}}`,
			client.Error{StatusCode: 400, Code: "invalid_argument", Message: "must be between 16 and 32768 MiB", Field: "resources.memoryMb"}, client.ErrInvalidArgument},
		{"not found", 404, `{"ok":false,"error":{"code":"not_found","message":"sandbox \"x\" not found"}}`,
			client.Error{StatusCode: 404, Code: "not_found", Message: `sandbox "x" not found`}, client.ErrNotFound},
		{"conflict carries the status", 409, `{"ok":false,"error":{"code":"conflict","message":"sandbox is terminated","status":"terminated"}}`,
			client.Error{StatusCode: 409, Code: "conflict", Message: "sandbox is terminated", Status: "terminated"}, client.ErrConflict},
		{"isolation unavailable is also unavailable", 422, `{"ok":false,"error":{"code":"isolation_unavailable","message":"no KVM","field":"isolation"}}`,
			client.Error{StatusCode: 422, Code: "isolation_unavailable", Message: "no KVM", Field: "isolation"}, client.ErrUnavailable},
		{"unauthorized", 401, `{"ok":false,"error":{"code":"unauthorized","message":"bad key"}}`,
			client.Error{StatusCode: 401, Code: "unauthorized", Message: "bad key"}, client.ErrUnauthorized},
		{"a proxy's page without an envelope", 502, "<html>Bad Gateway</html>",
			client.Error{StatusCode: 502, Code: "unavailable", Message: "<html>Bad Gateway</html>"}, client.ErrUnavailable},
		{"an empty 404", 404, "",
			client.Error{StatusCode: 404, Code: "not_found", Message: "Not Found"}, client.ErrNotFound},
		{"an unknown code falls back to the status", 429, `{"ok":false,"error":{"code":"slow_down","message":"later"}}`,
			client.Error{StatusCode: 429, Code: "slow_down", Message: "later"}, client.ErrQuotaExceeded},
		{"ok false with 200", 200, `{"ok":false,"error":{"code":"internal","message":"oops"}}`,
			client.Error{StatusCode: 200, Code: "internal", Message: "oops"}, client.ErrInternal},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, cl := newRecorder(t, c.status, c.body)
			_, err := cl.Get(context.Background(), "x")
			e, ok := errors.AsType[*client.Error](err)
			if !ok {
				t.Fatalf("error %v (%T), want *client.Error", err, err)
			}
			if *e != c.want {
				t.Errorf("error = %+v\nwant    %+v", *e, c.want)
			}
			if !errors.Is(err, c.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, c.is)
			}
			if errors.Is(err, client.ErrForbidden) {
				t.Errorf("errors.Is(%v, ErrForbidden) = true", err)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	for _, c := range []struct {
		e    client.Error
		want string
	}{
		{client.Error{Code: "invalid_argument", Message: "too big", Field: "resources.cpu"}, "airlock: resources.cpu: too big"},
		{client.Error{Code: "invalid_argument", Message: "resources.cpu: too big", Field: "resources.cpu"}, "airlock: resources.cpu: too big"},
		{client.Error{Code: "not_found", Message: "no such sandbox"}, "airlock: no such sandbox"},
		{client.Error{Code: "internal"}, "airlock: internal"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
	e := client.Error{Code: "invalid_argument", Message: "too big", Field: "resources.cpu"}
	if got := e.Describe("--cpu"); got != "--cpu: too big" {
		t.Errorf("Describe = %q", got)
	}
}

func TestBadAnswer(t *testing.T) {
	_, c := newRecorder(t, http.StatusOK, `<html>`)
	if _, err := c.Get(context.Background(), "x"); err == nil || errors.As(err, new(*client.Error)) {
		t.Fatalf("a 200 that is not JSON: %v, want a decoding error", err)
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, _ := client.New(url, "tok")
	_, err := c.Health(context.Background())
	if err == nil || errors.As(err, new(*client.Error)) {
		t.Fatalf("a closed port: %v, want a transport error", err)
	}
}
