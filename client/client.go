// Package client is the Go SDK of airlock's HTTP API (docs/api.md#http-api): create sandboxes, run commands in
// them (to completion or interactively), stream their logs and move files in and out.
//
// It imports only the standard library and airlock's wire types (package api). Every method takes
// a context; cancelling it aborts the request, and a deadline on it bounds the whole call,
// streaming included. A Client is safe for concurrent use.
//
// Every answer of the daemon other than a success comes back as an *Error, which errors.Is
// matches against this package's sentinels (ErrNotFound, ErrConflict, ...):
//
//	sb, err := c.Get(ctx, id)
//	if errors.Is(err, client.ErrNotFound) { ... }
//
// Errors of the transport (the daemon is not listening, TLS fails) are returned as the net/http
// client reports them, so they are never an *Error.
//
// Package clienttest runs a fake daemon in memory, for tests of programs that use this package.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/airlockrun/airlock/api"
)

// DefaultHost is where FromEnv looks for the daemon when AIRLOCK_HOST is not set.
const DefaultHost = "http://127.0.0.1:7070"

// maxErrorBody bounds how much of a failed answer is read to explain it.
const maxErrorBody = 1 << 20

// Client talks to one airlock daemon with one API key.
type Client struct {
	base  *url.URL // scheme, host and an optional path prefix; no query
	token string
	hc    *http.Client
	tls   *tls.Config // for WebSocket dials; nil means the defaults
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its HTTP requests through hc (for a custom transport,
// proxy or timeout). WebSocket connections (ExecInteractive) are dialled directly, not through
// hc. A timeout on hc also bounds streams such as Logs with Follow; prefer a context deadline.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTLSConfig sets the TLS configuration for an https daemon (a private CA, a client
// certificate). It applies to WebSocket connections always, and to HTTP requests unless
// WithHTTPClient is given too, in which case that client's transport is used as it is.
func WithTLSConfig(cfg *tls.Config) Option { return func(c *Client) { c.tls = cfg } }

// New returns a Client for the daemon at baseURL (e.g. "http://127.0.0.1:7070"; a path prefix
// such as "https://gw.example.com/airlock" is kept) that authenticates with token. An empty token
// sends no Authorization header.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("airlock client: base URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("airlock client: base URL %q: want http://HOST:PORT or https://HOST:PORT", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("airlock client: base URL %q: must not have a query, fragment or user", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	c := &Client{base: u, token: token}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = http.DefaultClient
		if c.tls != nil {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.TLSClientConfig = c.tls
			c.hc = &http.Client{Transport: t}
		}
	}
	return c, nil
}

// FromEnv returns a Client for the daemon in AIRLOCK_HOST (default DefaultHost; a bare
// "HOST:PORT" means http) with the key in AIRLOCK_TOKEN, the way the airlock CLI finds it.
func FromEnv(opts ...Option) (*Client, error) {
	return New(HostURL(os.Getenv("AIRLOCK_HOST")), os.Getenv("AIRLOCK_TOKEN"), opts...)
}

// HostURL turns an AIRLOCK_HOST value into a base URL: "" is DefaultHost, "HOST:PORT" gets
// "http://".
func HostURL(host string) string {
	host = strings.TrimSpace(host)
	switch {
	case host == "":
		return DefaultHost
	case strings.Contains(host, "://"):
		return host
	}
	return "http://" + host
}

// BaseURL is the daemon's address as the Client uses it.
func (c *Client) BaseURL() string { return c.base.String() }

// url returns the address of an API path, escaped and starting with "/", with a query.
func (c *Client) url(path string, q url.Values) string {
	s := c.base.String() + path
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

// sandboxPath is the escaped path /api/v1/sandboxes/{id} followed by rest (escaped too).
func sandboxPath(id, rest string) string {
	return "/api/v1/sandboxes/" + url.PathEscape(id) + rest
}

// request is one HTTP exchange with the daemon.
type request struct {
	method, path string
	query        url.Values
	body         io.Reader // sent as is; a JSON body is marshalled by call
	json         any       // marshalled into the body when set
	contentType  string
	length       int64 // Content-Length of body when known (> 0); else the body is sent chunked
	accept       string
}

// send performs r and returns the response when its status is 2xx; any other answer is turned
// into an *Error and the body is closed.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	body := r.body
	if r.json != nil {
		b, err := json.Marshal(r.json)
		if err != nil {
			return nil, fmt.Errorf("airlock client: encoding request: %w", err)
		}
		body, r.contentType, r.length = bytes.NewReader(b), "application/json", int64(len(b))
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.url(r.path, r.query), body)
	if err != nil {
		return nil, err
	}
	if r.length > 0 {
		req.ContentLength = r.length
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	req.Header.Set("Accept", "application/json")
	if r.accept != "" {
		req.Header.Set("Accept", r.accept)
	}
	c.authorize(req.Header)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func (c *Client) authorize(h http.Header) {
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
}

// call performs r and decodes the envelope's data into out (when out is not nil).
func (c *Client) call(ctx context.Context, r request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeData(resp, out)
}

// callFor sends req and decodes its answer as a T.
func callFor[T any](ctx context.Context, c *Client, req request) (T, error) {
	var out T
	err := c.call(ctx, req, &out)
	return out, err
}

// decodeData decodes a success envelope {"ok": true, "data": ...} into out.
func decodeData(resp *http.Response, out any) error {
	env := struct {
		OK    bool            `json:"ok"`
		Data  json.RawMessage `json:"data"`
		Error *api.Error      `json:"error"`
	}{}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("airlock client: %s %s: decoding the answer: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	if !env.OK {
		e := &Error{StatusCode: resp.StatusCode, Code: api.CodeInternal, Message: "the daemon answered ok: false"}
		if env.Error != nil {
			e.Code, e.Message, e.Field, e.Status = env.Error.Code, env.Error.Message, env.Error.Field, env.Error.Status
		}
		return e
	}
	if out == nil || len(env.Data) == 0 {
		return nil
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("airlock client: %s %s: decoding the answer: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return nil
}

// decodeError turns a non-2xx answer into an *Error: from the error envelope when there is one,
// else from the status and the start of the body (a proxy's error page, say).
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var env api.Response[json.RawMessage]
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if json.Unmarshal(b, &env) == nil && env.Error != nil {
		return &Error{StatusCode: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message,
			Field: env.Error.Field, Status: env.Error.Status, Rule: env.Error.Rule, RetryAfter: retry}
	}
	msg := strings.TrimSpace(string(b))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &Error{StatusCode: resp.StatusCode, Code: codeForStatus(resp.StatusCode), Message: msg}
}
