package webhook

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

// Limits of a registration.
const (
	MaxWebhooksPerTenant = 20
	MaxSelectors         = 32 // entries of events
	MaxSelectorLen       = 64
	MinSecretLen         = 16
	MaxSecretLen         = 256
	MaxDescriptionLen    = 256
	MaxURLLen            = 2048
)

// DefaultEvents are the selectors of a webhook registered without any: lifecycle and limit
// events (docs/api.md#http-api).
var DefaultEvents = []string{"sandbox.", "limit."}

// allowPrivateKey is the configuration key named when an address is refused.
const allowPrivateKey = "webhooks.allowPrivateNetworks"

// errBlocked marks a connection the address policy refused: it is not retried.
var errBlocked = netpolicy.ErrRefused

// checkRequest validates a registration and returns it normalized: events defaulted, "x.*"
// spelled "x.", duplicates removed. Errors are *errdefs.FieldError naming the field.
func (d *Dispatcher) checkRequest(req api.WebhookRequest) (api.WebhookRequest, error) {
	if err := d.checkURL(req.URL); err != nil {
		return req, err
	}
	events, err := normalizeEvents(req.Events)
	if err != nil {
		return req, err
	}
	req.Events = events
	if req.Secret != "" && len(req.Secret) < MinSecretLen {
		return req, errdefs.Invalid("secret", "must be at least %d characters (or left out: the daemon then generates one)", MinSecretLen)
	}
	if len(req.Secret) > MaxSecretLen {
		return req, errdefs.Invalid("secret", "must be at most %d characters", MaxSecretLen)
	}
	if n := len([]rune(req.Description)); n > MaxDescriptionLen {
		return req, errdefs.Invalid("description", "is %d characters long (at most %d)", n, MaxDescriptionLen)
	}
	return req, nil
}

// checkURL refuses what can never be delivered to: not an absolute http(s) URL with a host, user
// information in it (it would travel in the clear in logs and answers), and an address literal
// (or localhost) that the address policy refuses. A name that resolves to a refused address is
// caught when it is dialled.
func (d *Dispatcher) checkURL(raw string) error {
	if raw == "" {
		return errdefs.Invalid("url", "is required")
	}
	if len(raw) > MaxURLLen {
		return errdefs.Invalid("url", "is %d characters long (at most %d)", len(raw), MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errdefs.Invalid("url", "is not a URL: %v", errors.Unwrap(err))
	}
	if s := strings.ToLower(u.Scheme); (s != "http" && s != "https") || u.Opaque != "" {
		return errdefs.Invalid("url", "must be an absolute http:// or https:// URL")
	}
	if u.User != nil {
		return errdefs.Invalid("url", "must not contain user information: deliveries are authenticated by their signature")
	}
	host := u.Hostname()
	if host == "" {
		return errdefs.Invalid("url", "must have a host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return errdefs.Invalid("url", "port %q is not between 1 and 65535", p)
		}
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "localhost" || strings.HasSuffix(h, ".localhost") {
			a = netip.IPv6Loopback() // localhost is loopback whatever DNS says (RFC 6761)
		} else {
			return nil
		}
	}
	if err := d.checkAddr(a); err != nil {
		return errdefs.Invalid("url", "%s", strings.TrimPrefix(err.Error(), errBlocked.Error()+": "))
	}
	return nil
}

// checkAddr is the address policy of every connection (netpolicy.Guard): public addresses
// always, cloud metadata addresses never, the others only when AllowPrivateNetworks is set.
// Errors wrap netpolicy.ErrRefused.
func (d *Dispatcher) checkAddr(a netip.Addr) error { return d.guard().Check(a) }

func (d *Dispatcher) guard() netpolicy.Guard {
	return netpolicy.Guard{AllowPrivate: d.cfg.AllowPrivateNetworks, What: "webhooks", Setting: allowPrivateKey}
}

// normalizeEvents checks event selectors: exact types, prefixes ending in "." (or ".*"), "*".
func normalizeEvents(in []string) ([]string, error) {
	if len(in) == 0 {
		return append([]string(nil), DefaultEvents...), nil
	}
	if len(in) > MaxSelectors {
		return nil, errdefs.Invalid("events", "has %d entries (at most %d)", len(in), MaxSelectors)
	}
	out := make([]string, 0, len(in))
	for i, s := range in {
		field := fmt.Sprintf("events[%d]", i)
		switch {
		case s == "":
			return nil, errdefs.Invalid(field, "is empty: give an event type (exec.exited), a prefix ending in \".\" (limit.) or \"*\"")
		case len(s) > MaxSelectorLen:
			return nil, errdefs.Invalid(field, "is %d characters long (at most %d)", len(s), MaxSelectorLen)
		case strings.Trim(s, "abcdefghijklmnopqrstuvwxyz._*") != "":
			return nil, errdefs.Invalid(field, "%q: event selectors have only lowercase letters, '.', '_' and '*'", s)
		}
		s = strings.TrimSuffix(s, "*")
		if in[i] != "*" && (strings.Contains(s, "*") || (strings.HasSuffix(in[i], "*") && !strings.HasSuffix(s, "."))) {
			return nil, errdefs.Invalid(field, "%q: '*' is allowed alone or after a '.' at the end (sandbox.*)", in[i])
		}
		if in[i] == "*" {
			s = "*"
		}
		if s != "*" && (strings.HasPrefix(s, ".") || strings.Contains(s, "..")) {
			return nil, errdefs.Invalid(field, "%q is not an event type or prefix", in[i])
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// matches reports whether an event of type typ is selected by sel.
func matches(sel []string, typ string) bool {
	for _, s := range sel {
		switch {
		case s == "*", s == typ:
			return true
		case strings.HasSuffix(s, ".") && strings.HasPrefix(typ, s):
			return true
		}
	}
	return false
}
