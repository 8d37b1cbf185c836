package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/metrics"
)

// maxRecordedArgs bounds the arguments a tool.call event carries (as JSON); larger ones are
// recorded by digest and names only.
const maxRecordedArgs = 4 << 10

// maxRecordedError bounds an event's error text.
const maxRecordedError = 1 << 10

// record is what one call's tool.call event says, gathered as the call goes.
type record struct {
	id        string
	tool      string
	t         *tool // nil when no tool of the name was found
	caller    Caller
	args      map[string]any
	start     time.Time
	rule      string // what decided
	field     string // an invalid argument
	ran       bool   // the tool ran (allowed)
	sandboxID string // where it ran
	err       error
}

// finish records the call's event (and metrics) and fills res's event ID, sandbox and duration.
func (g *Gateway) finish(ctx context.Context, rc *record, res *api.ToolResult) {
	d := time.Since(rc.start)
	argsJSON := argsBytes(rc.args)
	sum := sha256.Sum256(argsJSON)
	data := map[string]any{"tool": rc.tool, "decision": "allow", "durationMs": d.Milliseconds(), "argsDigest": "sha256:" + hex.EncodeToString(sum[:])}
	if rc.rule != "" {
		data["rule"] = rc.rule
	}
	if rc.caller.KeyID != "" {
		data["keyId"] = rc.caller.KeyID
	}
	if rc.caller.AgentID != "" {
		data["agentId"] = capString(rc.caller.AgentID, 256)
	}
	if rc.caller.Remote != "" {
		data["remote"] = capString(rc.caller.Remote, 64)
	}
	label := metrics.ToolTenant
	if rc.t != nil {
		data["source"], data["backend"] = rc.t.source, rc.t.backend
		if rc.t.server != nil {
			data["server"] = rc.t.server.name
		}
		label = metricLabel(rc.t)
		recordArgs(data, rc.t.schema.Redact(rc.args), argsJSON)
	} else if len(rc.args) > 0 {
		// No schema says which arguments are sensitive: their names only.
		names := make([]string, 0, len(rc.args))
		for k := range rc.args {
			names = append(names, capString(k, 64))
		}
		slices.Sort(names)
		if len(names) > 64 {
			names = names[:64]
		}
		data["argNames"] = names
	}
	code := ""
	msg := rc.tool + " → allow"
	if rc.err != nil {
		code = errorCode(rc.err)
		data["error"] = capString(rc.err.Error(), maxRecordedError)
		if !rc.ran {
			data["decision"] = "deny"
			data["code"] = code
			msg = rc.tool + " → deny " + code
			if rc.field != "" {
				data["field"] = rc.field
			}
		} else {
			msg = rc.tool + " → error " + code
		}
	} else {
		n := resultBytes(*res)
		data["resultBytes"], data["isError"] = n, res.IsError
		if res.IsError {
			msg = rc.tool + " → allow (the tool failed)"
		}
	}
	sid := rc.sandboxID
	if sid == "" {
		sid = rc.caller.SandboxID
	}
	g.m.RecordEvent(ctx, sid, api.Event{ID: rc.id, Type: api.EventToolCall, Message: msg, Data: data})
	g.mx.ToolCall(label, rc.ran, code, d)
	res.EventID, res.SandboxID, res.DurationMs = rc.id, rc.sandboxID, d.Milliseconds()
}

// metricLabel is a tool's label: its name unless a tenant chose it.
func metricLabel(t *tool) string {
	switch {
	case t.source == api.ToolSourceBuiltin || t.source == api.ToolSourceConfig:
		return t.name
	case t.server != nil && t.server.source == api.ToolSourceConfig:
		return t.server.name + "__" + t.upstream
	}
	return metrics.ToolTenant
}

// recordArgs puts the (redacted) arguments into the event's data, or, when they are too large
// (raw: the arguments' JSON before redaction), only their names and the fact.
func recordArgs(data map[string]any, args map[string]any, raw []byte) {
	if args == nil {
		return
	}
	if len(raw) <= maxRecordedArgs {
		data["arguments"] = args
		return
	}
	b := raw
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, capString(k, 64))
	}
	slices.Sort(names)
	if len(names) > 64 {
		names = names[:64]
	}
	data["argNames"], data["argsTruncated"], data["argsBytes"] = names, true, len(b)
}

// argsBytes is the arguments' JSON, whose sha256 is the event's argsDigest (encoding/json sorts
// object keys, so equal arguments have equal digests).
func argsBytes(args map[string]any) []byte {
	if args == nil {
		args = map[string]any{}
	}
	b, _ := json.Marshal(args) // decoded from JSON: always encodes
	return b
}

// resultBytes is the size of a result's content.
func resultBytes(r api.ToolResult) int {
	n := 0
	for _, c := range r.Content {
		n += len(c.Text) + len(c.Data)
	}
	return n
}

// errorCode is the API's code of err, as the server would answer it.
func errorCode(err error) string {
	if fe, ok := errors.AsType[*errdefs.FieldError](err); ok && fe.Code != "" {
		return fe.Code
	}
	switch {
	case errors.Is(err, errdefs.ErrInvalidArgument):
		return api.CodeInvalidArgument
	case errors.Is(err, errdefs.ErrPermissionDenied):
		return api.CodeForbidden
	case errors.Is(err, errdefs.ErrNotFound):
		return api.CodeNotFound
	case errors.Is(err, errdefs.ErrConflict):
		return api.CodeConflict
	case errors.Is(err, errdefs.ErrQuota):
		return api.CodeQuotaExceeded
	case errors.Is(err, errdefs.ErrUnavailable), errors.Is(err, errdefs.ErrServiceUnavailable):
		return api.CodeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return api.CodeInternal
}

// capString keeps at most n bytes of s, saying how much was cut.
func capString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…[+" + strconv.Itoa(len(s)-n) + " bytes]"
}

// textResult is a result of one text item.
func textResult(text string, isError bool) api.ToolResult {
	return api.ToolResult{Content: []api.ToolContent{{Type: api.ContentText, Text: text}}, IsError: isError}
}

// errorResult is a failed tool's result, for messages meant for the model.
func errorResult(format string, a ...any) api.ToolResult {
	return textResult(fmt.Sprintf(format, a...), true)
}
