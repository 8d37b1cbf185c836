package client

import (
	"errors"
	"net/http"
	"strings"

	"github.com/airlockrun/airlock/api"
)

// Error is a request the daemon refused or failed: the error envelope of docs/api.md#http-api
// ({"ok": false, "error": {code, message, field, status}}) and the HTTP status it came with.
type Error struct {
	StatusCode int    // HTTP status, e.g. 404
	Code       string // stable and machine-readable: api.CodeNotFound, api.CodeConflict, ...
	Message    string // for a person
	Field      string // JSON path of the offending input field, e.g. "resources.memoryMb"
	Status     string // the sandbox's status, for conflicts (e.g. "terminated")
	// Rule is what refused a tool call beyond the field: the schema keyword an argument broke,
	// or the policy or rate limit that refused it.
	Rule string
	// RetryAfter is the answer's Retry-After in seconds (a 429), or 0.
	RetryAfter int
}

func (e *Error) Error() string {
	return "airlock: " + e.Describe(e.Field)
}

// Describe renders the error with the offending field called name (a CLI passes its flag's
// name), or without a field when name is empty.
func (e *Error) Describe(name string) string {
	msg := e.Message
	if e.Field != "" {
		// A daemon may already have said which field; say it once.
		msg = strings.TrimPrefix(msg, e.Field+": ")
	}
	if msg == "" {
		msg = e.Code
	}
	if name == "" {
		return msg
	}
	return name + ": " + msg
}

// The sentinels that errors.Is matches an *Error against, by its Code (or, for an answer without
// the envelope, by its HTTP status).
var (
	ErrInvalidArgument      = errors.New("invalid argument")      // 400, Field names the input
	ErrUnauthorized         = errors.New("unauthorized")          // 401: no key, or an unknown or revoked one
	ErrForbidden            = errors.New("forbidden")             // 403: an admin route with a tenant key, or what the operator did not grant (Code says which)
	ErrNotFound             = errors.New("not found")             // 404: no such sandbox, execution or file
	ErrConflict             = errors.New("conflict")              // 409: the sandbox is in the wrong state (Status says which)
	ErrPayloadTooLarge      = errors.New("payload too large")     // 413
	ErrIsolationUnavailable = errors.New("isolation unavailable") // 422: the host lacks the level
	ErrUnavailable          = errors.New("unavailable")           // 422/503: something else the host cannot provide
	ErrQuotaExceeded        = errors.New("quota exceeded")        // 429: a tenant quota or rate limit
	ErrInsufficientStorage  = errors.New("insufficient storage")  // 507: the sandbox's disk is full
	ErrNotImplemented       = errors.New("not implemented")       // 501: a route the server does not serve (a cluster's front API)
	ErrInternal             = errors.New("internal error")        // 5xx
)

var sentinelForCode = map[string]error{
	api.CodeInvalidArgument:      ErrInvalidArgument,
	api.CodeUnauthorized:         ErrUnauthorized,
	api.CodeForbidden:            ErrForbidden,
	api.CodeNotFound:             ErrNotFound,
	api.CodeConflict:             ErrConflict,
	api.CodePayloadTooLarge:      ErrPayloadTooLarge,
	api.CodeIsolationUnavailable: ErrIsolationUnavailable,
	api.CodeUnavailable:          ErrUnavailable,
	api.CodeQuotaExceeded:        ErrQuotaExceeded,
	api.CodeInsufficientStorage:  ErrInsufficientStorage,
	api.CodeNotImplemented:       ErrNotImplemented,
	api.CodeInternal:             ErrInternal,
	// What was not granted is still a 403.
	api.CodeSecretNotGranted:   ErrForbidden,
	api.CodeVolumeNotGranted:   ErrForbidden,
	api.CodeTemplateNotGranted: ErrForbidden,
	api.CodeImageNotAllowed:    ErrForbidden,
	// A tool call's refusals.
	api.CodeToolNotAllowed:   ErrForbidden,
	api.CodeInvalidArguments: ErrInvalidArgument,
	api.CodeRateLimited:      ErrQuotaExceeded,
}

// Is makes errors.Is(err, client.ErrNotFound) and the like work. An unavailable isolation level
// is also ErrUnavailable.
func (e *Error) Is(target error) bool {
	if target == ErrUnavailable && e.Code == api.CodeIsolationUnavailable {
		return true
	}
	s, ok := sentinelForCode[e.Code]
	if !ok {
		s = sentinelForCode[codeForStatus(e.StatusCode)]
	}
	return s == target
}

// codeForStatus is the error code an answer without an envelope stands for.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return api.CodeInvalidArgument
	case http.StatusUnauthorized:
		return api.CodeUnauthorized
	case http.StatusForbidden:
		return api.CodeForbidden
	case http.StatusNotFound:
		return api.CodeNotFound
	case http.StatusConflict:
		return api.CodeConflict
	case http.StatusRequestEntityTooLarge:
		return api.CodePayloadTooLarge
	case http.StatusUnprocessableEntity, http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return api.CodeUnavailable
	case http.StatusTooManyRequests:
		return api.CodeQuotaExceeded
	case http.StatusInsufficientStorage:
		return api.CodeInsufficientStorage
	case http.StatusNotImplemented:
		return api.CodeNotImplemented
	}
	return api.CodeInternal
}
