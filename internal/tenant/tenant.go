// Package tenant carries the authenticated tenant of a request in its context. Every sandbox
// belongs to one tenant, and a tenant sees only its own.
package tenant

import "context"

type key struct{}

type adminKey struct{}

type keyIDKey struct{}

// With returns ctx carrying tenant name.
func With(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, key{}, name)
}

// From returns the tenant ctx carries, or "" when it carries none (host-side callers that act for
// every tenant, such as recovery at start).
func From(ctx context.Context) string {
	s, _ := ctx.Value(key{}).(string)
	return s
}

// WithAdmin returns ctx marked as a request made with an admin key (the operator's, docs/security.md#who-is-trusted-with-what).
func WithAdmin(ctx context.Context) context.Context {
	return context.WithValue(ctx, adminKey{}, true)
}

// IsAdmin reports whether ctx is a request made with an admin key, or a host-side caller that
// acts for the operator (no tenant at all).
func IsAdmin(ctx context.Context) bool {
	admin, _ := ctx.Value(adminKey{}).(bool)
	return admin || From(ctx) == ""
}

// WithKey returns ctx carrying the ID of the API key a request was made with (key_...): tool
// policies bind keys (docs/tools.md#policies).
func WithKey(ctx context.Context, keyID string) context.Context {
	return context.WithValue(ctx, keyIDKey{}, keyID)
}

// KeyFrom returns the API key ID ctx carries, or "" (a host-side caller).
func KeyFrom(ctx context.Context) string {
	s, _ := ctx.Value(keyIDKey{}).(string)
	return s
}

type vouchedKey struct{}

// Vouched is a caller another airlock component has already authenticated: an airlock
// Kubernetes node's API, reached by the front API over the node's authenticated kubelet port,
// acts as Tenant for the front (docs/kubernetes.md#the-front-api). Only code in the daemon's
// process can put one in a request's context; nothing a client sends can.
type Vouched struct {
	Tenant string
	By     string // who vouched: recorded as the request's key
}

// WithVouched returns ctx carrying v: the API takes it as the request's principal.
func WithVouched(ctx context.Context, v Vouched) context.Context {
	return context.WithValue(ctx, vouchedKey{}, v)
}

// VouchedFrom returns the Vouched ctx carries, if any.
func VouchedFrom(ctx context.Context) (Vouched, bool) {
	v, ok := ctx.Value(vouchedKey{}).(Vouched)
	return v, ok && v.Tenant != ""
}
