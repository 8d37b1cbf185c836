package server

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/websocket"
)

// A browser's WebSocket cannot send an Authorization header, only the subprotocols it offers. So
// a WebSocket of the API may carry its key as one of them (docs/api.md#websockets-in-a-browser),
// as Kubernetes does with its bearer protocol:
//
//	Sec-WebSocket-Protocol: airlock.v1, airlock.bearer.<key>
//
// The daemon then answers airlock.v1, never echoing the key. A WebSocket keyed this way comes
// from a page; it must come from a page of the daemon's own origin, since a WebSocket is the one
// request a browser lets any other site's page send to the daemon and read the answer of: the
// rest of the API answers no CORS preflight. So a daemon that only the user's machine or network
// can reach cannot be driven through a browser by a page elsewhere, even one the key was pasted
// into.
const (
	// wsProtocol is the subprotocol of the API's WebSockets, the one the daemon answers with.
	wsProtocol = "airlock.v1"
	// wsBearer prefixes the key among the subprotocols a browser offers.
	wsBearer = "airlock.bearer."
)

// offeredProtocols are the subprotocols of a WebSocket upgrade request.
func offeredProtocols(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// protocolKey returns the key of a WebSocket upgrade of a WebSocket route that carries it among
// its subprotocols ("" when it does not), refusing an offer that lacks airlock.v1 (the answer
// would have to echo the key) and a page of another origin.
func (s *Server) protocolKey(r *http.Request, rt route) (string, error) {
	if !isUpgrade(r) || !strings.Contains(rt.doc.stream, "websocket") {
		return "", nil
	}
	var key string
	v1 := false
	for _, p := range offeredProtocols(r) {
		switch {
		case p == wsProtocol:
			v1 = true
		case strings.HasPrefix(p, wsBearer):
			if key != "" {
				return "", errdefs.Invalid("Sec-WebSocket-Protocol", "more than one %s protocol", wsBearer+"<key>")
			}
			key = strings.TrimPrefix(p, wsBearer)
		}
	}
	switch {
	case key == "":
		return "", nil
	case !v1:
		return "", errdefs.Invalid("Sec-WebSocket-Protocol", "a key sent as the %s<key> protocol needs %s offered beside it: the daemon answers with that one, never with the key", wsBearer, wsProtocol)
	}
	if o := r.Header.Get("Origin"); o != "" && !s.sameOrigin(r, o) {
		return "", errdefs.New(errdefs.ErrPermissionDenied, "a WebSocket whose key is a subprotocol must come from a page of the daemon's own origin, not %s "+
			"(set publicUrl in the configuration when the daemon is reached through a proxy)", o)
	}
	return key, nil
}

// sameOrigin reports whether a browser's Origin is the daemon's: the scheme and host the
// request reached it by, or its publicUrl's.
func (s *Server) sameOrigin(r *http.Request, origin string) bool {
	o, err := url.Parse(origin)
	if err != nil || o.Host == "" || o.Path != "" || o.User != nil {
		return false // "null", or not an origin
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if strings.EqualFold(o.Scheme, scheme) && strings.EqualFold(o.Host, r.Host) {
		return true
	}
	if s.cfg.PublicURL == "" {
		return false
	}
	p, err := url.Parse(s.cfg.PublicURL)
	return err == nil && strings.EqualFold(o.Scheme, p.Scheme) && strings.EqualFold(o.Host, p.Host)
}

// accept upgrades r to a WebSocket, answering with airlock.v1 when the client offered it (a
// browser that sent its key as a subprotocol must be answered one it offered).
func accept(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
	for _, p := range offeredProtocols(r) {
		if p == wsProtocol {
			w.Header().Set("Sec-WebSocket-Protocol", wsProtocol)
			break
		}
	}
	return websocket.Accept(w, r)
}
