package api

// Response is the envelope of every answer: {"ok": true, "data": ...} or
// {"ok": false, "error": {...}}.
type Response[T any] struct {
	OK    bool   `json:"ok"`
	Data  T      `json:"data,omitempty"`
	Error *Error `json:"error,omitempty"`
}

// Error is a failed request's reason.
type Error struct {
	// Code is stable and machine-readable: invalid_argument, unauthorized, forbidden, not_found,
	// conflict, payload_too_large, isolation_unavailable, gpu_unavailable, unavailable, quota_exceeded,
	// insufficient_storage, internal; and the 403s secret_not_granted, volume_not_granted,
	// template_not_granted, image_not_allowed; and a tool call's tool_not_allowed (403),
	// invalid_arguments (400) and rate_limited (429).
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field is the JSON path of the offending input field, when one is to blame.
	Field string `json:"field,omitempty"`
	// Status is the sandbox's current status, for conflict errors.
	Status string `json:"status,omitempty"`
	// Rule is what refused the request, where more than the field says it: the schema keyword an
	// invalid tool argument broke (pattern, format, x-airlock-path-prefix, ...), or the policy
	// that refused a tool.
	Rule string `json:"rule,omitempty"`
}

// Error codes.
const (
	CodeInvalidArgument      = "invalid_argument"
	CodeUnauthorized         = "unauthorized"
	CodeForbidden            = "forbidden"
	CodeNotFound             = "not_found"
	CodeConflict             = "conflict"
	CodePayloadTooLarge      = "payload_too_large"
	CodeIsolationUnavailable = "isolation_unavailable"
	CodeGPUUnavailable       = "gpu_unavailable" // resources.gpuEnabled: no level of this host has a GPU
	CodeUnavailable          = "unavailable"
	CodeQuotaExceeded        = "quota_exceeded"
	CodeInsufficientStorage  = "insufficient_storage"
	CodeInternal             = "internal"
	CodeNotImplemented       = "not_implemented" // a route this server does not serve (the cluster's front API)
	// 403s that say what was not granted: a secret, a volume or template of the operator's, an
	// image outside the approved ones.
	CodeSecretNotGranted   = "secret_not_granted"
	CodeVolumeNotGranted   = "volume_not_granted"
	CodeTemplateNotGranted = "template_not_granted"
	CodeImageNotAllowed    = "image_not_allowed"
	// Refusals of a tool call (docs/tools.md): the caller may not call the tool (403), an
	// argument breaks the tool's schema (400, field is its JSON pointer, rule the keyword), the
	// tool's or the policy's rate limit is spent (429 with Retry-After).
	CodeToolNotAllowed   = "tool_not_allowed"
	CodeInvalidArguments = "invalid_arguments"
	CodeRateLimited      = "rate_limited"
)
