package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/airlockrun/airlock/internal/netpolicy"
)

// Rules of the proxy's own, beside netpolicy's: in events and in X-Airlock-Denied.
const (
	RuleHostMismatch   = "host_mismatch"    // explicit proxy: the Host header names another host than the URL
	RuleSNIMismatch    = "sni_mismatch"     // CONNECT: the ClientHello names another host
	RuleNoSNI          = "no_sni"           // transparent TLS: the ClientHello names no host
	RuleBadClientHello = "bad_client_hello" // transparent TLS or CONNECT: not a ClientHello the proxy can read
	RuleBadRequest     = "bad_request"      // not a request the proxy can serve (no Host, bad target, ...)
	RuleLoop           = "loop"             // the destination is one of the proxy's own listeners
	RuleOverloaded     = "overloaded"       // the listener already serves MaxConns connections
	// Failures, not decisions (Allow is false, the policy allowed the name):
	RuleUnresolvable = "cannot_resolve" // the name did not resolve
	RuleUpstream     = "upstream_error" // the destination could not be reached or failed
)

// Protocols of events.
const (
	ProtoHTTP    = "http"
	ProtoConnect = "connect"
	ProtoTLS     = "tls"
	ProtoTCP     = "tcp"
)

// emit completes ev and hands it to sb.
func (p *Proxy) emit(sb Sandbox, ev netpolicy.Event) {
	ev.Kind = netpolicy.KindConnect
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	if ev.Start.IsZero() {
		ev.Start = ev.Time
	}
	p.log().Debug("egress", "proto", ev.Proto, "name", ev.Name, "addr", ev.Addr, "port", ev.Port,
		"allow", ev.Allow, "rule", ev.Rule, "out", ev.BytesOut, "in", ev.BytesIn)
	sb.Event(ev)
}

// decided sets ev's decision fields.
func decided(ev netpolicy.Event, d netpolicy.Decision) netpolicy.Event {
	ev.Allow, ev.Rule, ev.Reason = d.Allow, d.Rule, d.Reason
	return ev
}

// refusal is the proxy's answer to a destination it did not connect to.
type refusal struct {
	status int // HTTP status: 400, 403, 502 or 503
	d      netpolicy.Decision
}

func refuse(status int, rule, format string, a ...any) refusal {
	return refusal{status: status, d: netpolicy.Decision{Rule: rule, Reason: fmt.Sprintf(format, a...)}}
}

// dialRefusal turns an error of dial into the answer for the sandbox, and the refused
// address if there is one.
func dialRefusal(err error) (refusal, *DeniedError) {
	if de, ok := errors.AsType[*DeniedError](err); ok {
		return refusal{status: http.StatusForbidden, d: de.Decision}, de
	}
	if re, ok := errors.AsType[*ResolveError](err); ok {
		return refuse(http.StatusBadGateway, RuleUnresolvable, "%v", re), nil
	}
	return refuse(http.StatusBadGateway, RuleUpstream, "%v", err), nil
}

// text is the body of an HTTP refusal: one line naming the destination, the rule and why.
func (r refusal) text(name string, port int) string {
	dest := "egress"
	if name != "" {
		dest = "egress to " + hostPort(name, port)
	}
	verb := "denied"
	if r.status != http.StatusForbidden {
		verb = "failed"
	}
	return fmt.Sprintf("airlock: %s %s (%s): %s\n", dest, verb, r.d.Rule, r.d.Reason)
}
