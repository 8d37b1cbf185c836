package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestConsoleVerb: airlock console prints the console's address with the key in its fragment,
// and says when the daemon has no console.
func TestConsoleVerb(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ui/" || r.Header.Get("Authorization") != "" {
			t.Errorf("asked %s %s (Authorization %q)", r.Method, r.URL.Path, r.Header.Get("Authorization"))
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	t.Setenv("AIRLOCK_HOST", strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("AIRLOCK_TOKEN", "alk_abc")
	for _, c := range []struct {
		name   string
		status int
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"with the key", http.StatusOK, nil, 0, srv.URL + "/ui/#key=alk_abc\n", ""},
		{"without it", http.StatusOK, []string{"--no-key"}, 0, srv.URL + "/ui/\n", ""},
		{"no console", http.StatusServiceUnavailable, nil, 1, "", "has no console"},
		{"an argument", http.StatusOK, []string{"x"}, 2, "", "usage: airlock console"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status = c.status
			code, out, errOut := airlockCLI(t, "", append([]string{"console"}, c.args...)...)
			if code != c.code || out != c.stdout || !strings.Contains(errOut, c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
	}
	t.Setenv("AIRLOCK_TOKEN", "")
	if code, out, errOut := airlockCLI(t, "", "console"); code != 0 || out != srv.URL+"/ui/\n" || !strings.Contains(errOut, "AIRLOCK_TOKEN is not set") {
		t.Errorf("without a key: %d %q %q", code, out, errOut)
	}
}
