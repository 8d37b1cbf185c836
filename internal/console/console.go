// Package console serves airlock's web console at /ui: the page and its content-hashed assets,
// built from web/console by `make console` (run by `make build`) into assets/ and embedded in the
// binary. The console holds no privilege of its own: the page talks to the public API with the
// key its user gives it (docs/console.md). Without built assets, /ui says how to build them.
package console

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed all:assets
var embedded embed.FS

// Prefix is where the console is served.
const Prefix = "/ui/"

// CSP is the page's Content-Security-Policy: its own scripts and styles only (no inline script,
// no eval), requests only to the daemon itself (the API, its WebSockets), no frames around it,
// nowhere to send a form.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; font-src 'self'; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// notBuilt is /ui's answer in a binary built without the console's assets (go build alone).
const notBuilt = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>airlock console: not built</title></head>
<body><h1>The web console is not in this binary</h1>
<p>This airlock was built without the console's assets (a plain <code>go build</code>). Build it with
<code>make build</code>, which runs <code>make console</code> (Node.js and npm: it installs esbuild and
xterm.js from npm, pinned, and bundles web/console into internal/console/assets) before <code>go build</code>
embeds them. The API at <code>/api/v1</code> works without it.</p></body></html>
`

// Budget is what the page's first load may weigh, gzipped: the page and every asset it loads
// (web/console/build.mjs refuses a build over it; TestFirstLoad checks the embedded one).
const Budget = 300 << 10

// Handler serves the console under Prefix: the page at Prefix (and for any path that is not an
// asset, so that a reload keeps working), assets by name, gzipped for clients that take it.
func Handler() http.Handler { return newHandler(Assets()) }

// Assets are the console's embedded files (index.html and the hashed assets, when built).
func Assets() fs.FS {
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		panic(err) // "assets" is a literal directory of this package
	}
	return sub
}

// Built reports whether the console's assets are in this binary.
func Built() bool { return built(Assets()) }

func built(files fs.FS) bool {
	_, err := fs.Stat(files, "index.html")
	return err == nil
}

func newHandler(files fs.FS) *handler { return &handler{files: files, built: built(files)} }

type handler struct {
	files fs.FS
	built bool // index.html is there
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	if r.URL.Path+"/" == Prefix {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	if !h.built {
		hd.Set("Content-Type", "text/html; charset=utf-8")
		hd.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(notBuilt)) // the client gone: nothing to answer
		return
	}
	if name == "" || name == "index.html" || !strings.Contains(name, ".") {
		// The page: never cached, so that a new binary's assets are picked up at once.
		h.serve(w, r, "index.html", "no-cache")
		return
	}
	if strings.Contains(name, "/") || strings.HasSuffix(name, ".gz") || name == "README.md" {
		http.NotFound(w, r)
		return
	}
	// Every other file's name carries a hash of its content: cached for good.
	h.serve(w, r, name, "public, max-age=31536000, immutable")
}

// serve writes the asset name, its .gz when the client takes gzip and there is one.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, name, cache string) {
	hd := w.Header()
	file := name
	if acceptsGzip(r) {
		if _, err := fs.Stat(h.files, name+".gz"); err == nil {
			file = name + ".gz"
			hd.Set("Content-Encoding", "gzip")
		}
	}
	hd.Add("Vary", "Accept-Encoding")
	b, err := fs.ReadFile(h.files, file)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	hd.Set("Content-Type", ct)
	hd.Set("Cache-Control", cache)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b) // the client gone: nothing to answer
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for e := range strings.SplitSeq(v, ",") {
			e, q, _ := strings.Cut(strings.TrimSpace(e), ";")
			if strings.EqualFold(strings.TrimSpace(e), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}
