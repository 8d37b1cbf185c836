package console

import (
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

func get(t *testing.T, h http.Handler, method, path string, header map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// TestHeaders: every answer of the console carries its strict headers, built or not.
func TestHeaders(t *testing.T) {
	for name, files := range map[string]fs.FS{"built": fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}}, "not built": fstest.MapFS{}} {
		resp := get(t, newHandler(files), "GET", "/ui/", nil)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self';", "frame-ancestors 'none'", "connect-src 'self';", "base-uri 'none'", "form-action 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", name, csp, want)
			}
		}
		for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*"} {
			if strings.Contains(csp, bad) {
				t.Errorf("%s: CSP %q allows %q", name, csp, bad)
			}
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: headers %v", name, resp.Header)
		}
	}
}

// TestNotBuilt: a binary built without the assets says so at /ui, and how to build them.
func TestNotBuilt(t *testing.T) {
	resp := get(t, newHandler(fstest.MapFS{"README.md": {}}), "GET", "/ui/", nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "make build") || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}

// TestServe: the page is never cached, hashed assets are cached for good and gzipped for
// clients that take it; nothing else of the directory is served.
func TestServe(t *testing.T) {
	h := newHandler(fstest.MapFS{
		"index.html":         {Data: []byte("page")},
		"index.html.gz":      {Data: gz(t, "page")},
		"app-ABCD1234.js":    {Data: []byte("js")},
		"app-ABCD1234.js.gz": {Data: gz(t, "js")},
		"app-ABCD1234.css":   {Data: []byte("css")},
		"README.md":          {Data: []byte("readme")},
	})
	for _, c := range []struct {
		path, encoding     string
		status             int
		body, ctype, cache string
	}{
		{"/ui/", "", 200, "page", "text/html; charset=utf-8", "no-cache"},
		{"/ui/", "gzip, deflate", 200, "page", "text/html; charset=utf-8", "no-cache"},
		{"/ui/sandboxes", "", 200, "page", "text/html; charset=utf-8", "no-cache"},
		{"/ui/app-ABCD1234.js", "gzip", 200, "js", "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"},
		{"/ui/app-ABCD1234.js", "", 200, "js", "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"},
		{"/ui/app-ABCD1234.js", "gzip;q=0", 200, "js", "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"},
		{"/ui/app-ABCD1234.css", "gzip", 200, "css", "text/css; charset=utf-8", "public, max-age=31536000, immutable"},
		{"/ui/app-ABCD1234.js.gz", "", 404, "", "", ""},
		{"/ui/README.md", "", 404, "", "", ""},
		{"/ui/nope.js", "", 404, "", "", ""},
		{"/ui/a/b.js", "", 404, "", "", ""},
	} {
		resp := get(t, h, "GET", c.path, map[string]string{"Accept-Encoding": c.encoding})
		if resp.StatusCode != c.status {
			t.Errorf("%s (%s): %d, want %d", c.path, c.encoding, resp.StatusCode, c.status)
			continue
		}
		if c.status != 200 {
			continue
		}
		var body io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		if string(b) != c.body || resp.Header.Get("Content-Type") != c.ctype || resp.Header.Get("Cache-Control") != c.cache {
			t.Errorf("%s (%s): %q %q %q", c.path, c.encoding, b, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
		}
	}
	if resp := get(t, h, "GET", "/ui", nil); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("/ui: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b strings.Builder
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// TestFirstLoad: the console in this binary loads under its budget, gzipped: the page and every
// asset it names. (The browser suite, test/e2e TestConsole, measures the same over the wire.)
func TestFirstLoad(t *testing.T) {
	files := Assets()
	if !built(files) {
		t.Skip("the console's assets are not built (make console): nothing to weigh")
	}
	page, err := fs.ReadFile(files, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	names := []string{"index.html"}
	for _, m := range regexp.MustCompile(`(?:src|href)="([\w.-]+)"`).FindAllStringSubmatch(string(page), -1) {
		names = append(names, m[1])
	}
	if len(names) < 3 {
		t.Fatalf("index.html names %v: want its script and its stylesheet", names[1:])
	}
	for _, n := range names {
		fi, err := fs.Stat(files, n+".gz")
		if err != nil {
			t.Fatalf("%s has no .gz: %v", n, err)
		}
		total += int(fi.Size())
	}
	t.Logf("first load: %d B gzipped (%s); budget %d B", total, strings.Join(names, ", "), Budget)
	if total > Budget {
		t.Errorf("the first load is %d B gzipped, over its budget of %d B", total, Budget)
	}
}
