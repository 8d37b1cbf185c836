// Package errdefs holds airlock's few sentinel errors. Code wraps them with context
// (fmt.Errorf("sandbox %q: %w", id, errdefs.ErrNotFound)) and the edges — the HTTP server and
// the CLI — map them to a status or an exit code once, with errors.Is.
package errdefs

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrInvalidArgument: the caller asked for something malformed or out of range (HTTP 400).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound: no such sandbox, execution or file (HTTP 404).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the object is in the wrong state for the request (HTTP 409).
	ErrConflict = errors.New("conflict")
	// ErrUnavailable: this host cannot provide what was asked, e.g. an isolation level (HTTP 422).
	ErrUnavailable = errors.New("unavailable")
	// ErrServiceUnavailable: a part of the daemon the request needs is not working, e.g. its image
	// store could not be opened (HTTP 503). Unlike ErrUnavailable, it is the daemon's state, not
	// what the host can do.
	ErrServiceUnavailable = errors.New("service unavailable")
	// ErrSetup: a sandbox could not be set up on a host that should support it (HTTP 500, exit 125).
	ErrSetup = errors.New("sandbox setup failed")
	// ErrUnauthenticated: no API key, or one that is unknown or revoked (HTTP 401).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied: the caller may not do this, e.g. read a blocked path (HTTP 403).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrTooLarge: the request or upload is larger than allowed (HTTP 413).
	ErrTooLarge = errors.New("too large")
	// ErrQuota: a tenant quota or rate limit is exhausted (HTTP 429).
	ErrQuota = errors.New("quota exceeded")
	// ErrNoSpace: the sandbox's writable layer is full (HTTP 507).
	ErrNoSpace = errors.New("no space left in the sandbox")
	// ErrStoreFull: the daemon's own store (its database in the data dir) cannot be written —
	// its disk is full or failing — so nothing that must be recorded first can be done (HTTP
	// 507, like ErrNoSpace, but the daemon's disk, not the sandbox's layer).
	ErrStoreFull = errors.New("the daemon's store cannot be written")
	// ErrNotImplemented: a route of the API this server does not serve (HTTP 501: the cluster's
	// front API, for the host routes it has no equivalent of yet).
	ErrNotImplemented = errors.New("not implemented")
)

// FieldError is an ErrInvalidArgument that names the offending input field, so that the API can
// return {"field": ...} and the CLI can name the flag.
type FieldError struct {
	Field   string // JSON path of the field, e.g. "resources.memoryMb"
	Message string // what is wrong and what is allowed
	// Kind is the sentinel the error stands for; nil means ErrInvalidArgument. A valid value this
	// host or version cannot provide is ErrUnavailable.
	Kind error
	// Code, when set, is the API's error code instead of the one Kind maps to (a 403
	// secret_not_granted is still an ErrPermissionDenied).
	Code string
	// Rule, when set, names what refused the value beyond the field (a schema keyword, a
	// policy): the API's error.rule.
	Rule string
	// RetryAfter, when set, is how long until the request may succeed (a 429's Retry-After).
	RetryAfter time.Duration
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Message)
}

// Unwrap makes errors.Is(err, e.Kind) true.
func (e *FieldError) Unwrap() error {
	if e.Kind == nil {
		return ErrInvalidArgument
	}
	return e.Kind
}

// Invalid returns a *FieldError for field with a formatted message.
func Invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Unavailable returns a *FieldError for a valid value of field that cannot be provided here.
func Unavailable(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...), Kind: ErrUnavailable}
}

// Denied returns a *FieldError for a field whose value the caller may not use, with an API code
// saying what was refused (HTTP 403).
func Denied(field, code, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...), Kind: ErrPermissionDenied, Code: code}
}

// TooLarge returns a *FieldError for a value of field larger than can be taken (HTTP 413).
func TooLarge(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...), Kind: ErrTooLarge}
}

// kindError is a message that stands for one of the sentinels.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// New returns an error with a formatted message that errors.Is matches against kind (one of the
// sentinels above) without the sentinel's text in the message.
func New(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}
