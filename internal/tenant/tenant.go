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
