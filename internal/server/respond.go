package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// written is returned by handlers that wrote their own response (a download, a stream).
var written = errors.New("response written")

// writeJSON writes the success envelope. A nil slice is written as [], never null: the OpenAPI
// document declares every list an array.
func writeJSON(w http.ResponseWriter, status int, data any) {
	if v := reflect.ValueOf(data); v.Kind() == reflect.Slice && v.IsNil() {
		data = reflect.MakeSlice(v.Type(), 0, 0).Interface()
	}
	b, err := json.Marshal(api.Response[any]{OK: true, Data: data})
	if err != nil {
		writeError(w, nil, fmt.Errorf("encode response: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // the client gone: nothing to answer
}

// writeBare writes v as it is, without the envelope: the answers of the compatibility surface
// (seed 002's bare objects).
func writeBare(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeErrorAs(w, nil, fmt.Errorf("encode response: %w", err), true)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // the client gone: nothing to answer
}

// writeError maps err to a status and the error envelope. This is the one place where errors
// become HTTP statuses.
func writeError(w http.ResponseWriter, log *slog.Logger, err error) { writeErrorAs(w, log, err, false) }

// writeErrorAs is writeError; bare writes the compatibility surface's body, {"error": {...}},
// instead of the envelope.
func writeErrorAs(w http.ResponseWriter, log *slog.Logger, err error, bare bool) {
	status, e := errorStatus(err)
	if status >= 500 && log != nil {
		log.Error("request failed", "err", err)
	}
	if fe, ok := errors.AsType[*errdefs.FieldError](err); ok && fe.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(fe.RetryAfter.Seconds()))))
	}
	var body any = api.Response[any]{Error: &e}
	if bare {
		body = api.CompatError{Error: e}
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // the client gone: nothing to answer
}

func errorStatus(err error) (int, api.Error) {
	e := api.Error{Message: err.Error()}
	var code string
	if fe, ok := errors.AsType[*errdefs.FieldError](err); ok {
		e.Field, e.Message, e.Rule, code = fe.Field, fe.Message, fe.Rule, fe.Code
	}
	status, e := statusOf(err, e)
	if code != "" {
		e.Code = code
	}
	return status, e
}

// statusOf is errorStatus's mapping of the sentinels.
func statusOf(err error, e api.Error) (int, api.Error) {
	if se, ok := errors.AsType[*sandbox.StateError](err); ok {
		e.Status = se.Status
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || errors.Is(err, errdefs.ErrTooLarge):
		e.Code = api.CodePayloadTooLarge
		return http.StatusRequestEntityTooLarge, e
	case errors.Is(err, errdefs.ErrInvalidArgument):
		e.Code = api.CodeInvalidArgument
		return http.StatusBadRequest, e
	case errors.Is(err, errdefs.ErrUnauthenticated):
		e.Code = api.CodeUnauthorized
		return http.StatusUnauthorized, e
	case errors.Is(err, errdefs.ErrPermissionDenied):
		e.Code = api.CodeForbidden
		return http.StatusForbidden, e
	case errors.Is(err, errdefs.ErrNotFound):
		e.Code = api.CodeNotFound
		return http.StatusNotFound, e
	case errors.Is(err, errdefs.ErrConflict):
		e.Code = api.CodeConflict
		return http.StatusConflict, e
	case errors.Is(err, errdefs.ErrUnavailable):
		e.Code = api.CodeUnavailable
		if e.Field == "isolation" || e.Field == "spec.isolation" { // a create's, a pool's
			e.Code = api.CodeIsolationUnavailable
		}
		return http.StatusUnprocessableEntity, e
	case errors.Is(err, errdefs.ErrServiceUnavailable):
		e.Code = api.CodeUnavailable
		return http.StatusServiceUnavailable, e
	case errors.Is(err, errdefs.ErrQuota):
		e.Code = api.CodeQuotaExceeded
		return http.StatusTooManyRequests, e
	case errors.Is(err, errdefs.ErrNoSpace) || errors.Is(err, errdefs.ErrStoreFull):
		e.Code = api.CodeInsufficientStorage
		return http.StatusInsufficientStorage, e
	}
	e.Code = api.CodeInternal
	return http.StatusInternalServerError, e
}

// decode reads a JSON body strictly into v: at most limit bytes (413 beyond), no unknown fields,
// no trailing data; the error names the field that is wrong.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("request body is larger than %d bytes: %w", limit, errdefs.ErrTooLarge)
		}
		return errdefs.Invalid("body", "cannot read the body: %v", err)
	}
	return decodeJSON(body, v)
}

// decodeJSON is decode without the body reading, for bodies already in hand (and the fuzz test).
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errdefs.Invalid("body", "a JSON object is required")
	}
	if err := checkKeys(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errdefs.Invalid("body", "unexpected data after the JSON object")
	}
	return nil
}

// jsonError turns a decoding error into a *errdefs.FieldError naming the field where it can.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return errdefs.Invalid("body", "malformed JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		if typ.Type == vcpuType {
			return errdefs.Invalid(field, "must be a number of vCPUs: a decimal string such as \"2.0\" or a number (got %s)", typ.Value)
		}
		return errdefs.Invalid(field, "must be %s, not JSON %s", jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errdefs.Invalid("body", "truncated JSON")
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		if name = strings.Trim(name, `"`); name == "" {
			return errdefs.Invalid("body", "unknown field %q", name)
		}
		return errdefs.Invalid(name, "unknown field")
	}
	// Errors of custom decoders, e.g. "command must be a string or an array of strings".
	if f, rest, ok := strings.Cut(strings.TrimPrefix(msg, "json: "), " "); ok && f != "" && !strings.Contains(f, ":") {
		return errdefs.Invalid(f, "%s", rest)
	}
	return errdefs.Invalid("body", "%s", msg)
}

func jsonKind(k string) string {
	switch k {
	case "float64", "float32", "int", "int64", "int32", "uint16", "uint32", "uint64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return k
}
