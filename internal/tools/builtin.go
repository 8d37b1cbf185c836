package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/manager"
)

// The built-in tools every tenant has (unless the operator turns one off, or a policy refuses
// it). They run in the caller's workspace: a sandbox of the tenant kept per caller (config
// tools.workspace), or the sandbox the call names.

// builtinSchemas are the built-in tools' input schemas.
var builtinSchemas = map[string]string{
	api.ToolRunCode: `{"type": "object", "required": ["code"], "additionalProperties": false, "properties": {
		"code": {"type": "string", "description": "the program", "maxLength": 1048576},
		"language": {"type": "string", "enum": ["python", "javascript", "shell"], "default": "python"},
		"timeoutSeconds": {"type": "number", "minimum": 1, "maximum": 3600, "description": "default: the tool's timeout (60)"}}}`,
	api.ToolReadFile: `{"type": "object", "required": ["path"], "additionalProperties": false, "properties": {
		"path": {"type": "string", "minLength": 1, "description": "a path in the sandbox; relative to its workdir (/workspace)"}}}`,
	api.ToolWriteFile: `{"type": "object", "required": ["path", "content"], "additionalProperties": false, "properties": {
		"path": {"type": "string", "minLength": 1, "description": "a path in the sandbox; relative to its workdir (/workspace); missing directories are made"},
		"content": {"type": "string"},
		"encoding": {"type": "string", "enum": ["utf8", "base64"], "default": "utf8"}}}`,
	api.ToolListFiles: `{"type": "object", "additionalProperties": false, "properties": {
		"path": {"type": "string", "description": "a directory in the sandbox (default: its workdir, /workspace)"}}}`,
	api.ToolHTTPFetch: `{"type": "object", "required": ["url"], "additionalProperties": false, "properties": {
		"url": {"type": "string", "pattern": "^https?://", "description": "an http or https URL the sandbox's egress policy allows"},
		"method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"], "default": "GET"},
		"headers": {"type": "object", "additionalProperties": {"type": "string"}},
		"body": {"type": "string"}}}`,
}

var builtinDescriptions = map[string]string{
	api.ToolRunCode:   "Run Python, JavaScript (Node.js) or shell code in an isolated sandbox; returns stdout, stderr, the exit code and the files the code wrote.",
	api.ToolReadFile:  "Read a file from the sandbox (text, or base64 for binary content).",
	api.ToolWriteFile: "Write a file in the sandbox, making missing directories.",
	api.ToolListFiles: "List a directory of the sandbox.",
	api.ToolHTTPFetch: "Fetch a URL through the sandbox's egress proxy, within its network policy.",
}

var builtinRuns = map[string]func(ctx context.Context, g *Gateway, inv *invocation) (api.ToolResult, error){
	api.ToolRunCode:   runCode,
	api.ToolReadFile:  readFile,
	api.ToolWriteFile: writeFile,
	api.ToolListFiles: listFiles,
	api.ToolHTTPFetch: httpFetch,
}

func builtinNames() string {
	names := make([]string, 0, len(builtinSchemas))
	for n := range builtinSchemas {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// builtin compiles built-in tool name as the operator configured it; nil when it is off.
func (g *Gateway) builtin(name string) (*tool, error) {
	bc := g.cfg.Builtins[name]
	if bc.Disabled {
		return nil, nil
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(builtinSchemas[name]), &raw); err != nil {
		return nil, err
	}
	schema, err := CompileSchema(raw, 0)
	if err != nil {
		return nil, err
	}
	t := &tool{name: name, description: builtinDescriptions[name], source: api.ToolSourceBuiltin, backend: api.ToolBackendBuiltin,
		schema: schema, timeout: defaultTimeout, builtin: builtinRuns[name], sandbox: bc.Sandbox}
	if name == api.ToolRunCode {
		t.timeout = maxTimeout // bounded by the call's timeoutSeconds
	}
	if bc.RateLimit != "" {
		r, err := ParseRate(bc.RateLimit)
		if err != nil {
			return nil, err
		}
		t.rate, t.rateText = &r, bc.RateLimit
	}
	return t, nil
}

// workspace is where a built-in call runs.
func (g *Gateway) workspace(ctx context.Context, inv *invocation) (place, error) {
	p, err := g.sandboxFor(ctx, inv, inv.tool.sandbox, "workspace")
	if err == nil {
		inv.rec.sandboxID = p.id
	}
	return p, err
}

func str(args map[string]any, name string) string {
	s, _ := args[name].(string)
	return s
}

// interpreters are run_code's commands by language; the code follows as one argument.
var interpreters = map[string][]string{
	"python":     {"python3", "-c"},
	"javascript": {"node", "-e"},
	"shell":      {"/bin/sh", "-c"},
}

// maxCodeArg is the largest program run_code passes as an argument (execve takes 128 KiB per
// argument); a larger one is read from standard input.
const maxCodeArg = 100 << 10

// runCode is run_code: the code in the workspace, its output, status and the files it wrote.
func runCode(ctx context.Context, g *Gateway, inv *invocation) (api.ToolResult, error) {
	lang := str(inv.args, "language")
	if lang == "" {
		lang = "python"
	}
	code := str(inv.args, "code")
	timeout := defaultTimeout.Seconds()
	if t, ok := inv.args["timeoutSeconds"].(float64); ok {
		timeout = t
	}
	p, err := g.workspace(ctx, inv)
	if err != nil {
		return api.ToolResult{}, err
	}
	defer p.release()
	req := api.ExecRequest{Command: append(append([]string{}, interpreters[lang]...), code), Timeout: timeout}
	if len(code) > maxCodeArg {
		req.Command = map[string][]string{"python": {"python3", "-"}, "javascript": {"node", "-"}, "shell": {"/bin/sh", "-s"}}[lang]
		req.Stdin = code
	}
	var execID string
	res, err := g.m.Exec(ctx, p.id, req, manager.Stream{Started: func(id string) { execID = id }})
	if err != nil {
		return api.ToolResult{}, err
	}
	out := codeResult(res)
	if created, modified, ok := g.m.ExecFiles(ctx, p.id, execID, 2*time.Second); ok {
		files := append(append([]string{}, created...), modified...)
		sort.Strings(files)
		out.StructuredContent["files"] = files
		if len(files) > 0 {
			out.Content = append(out.Content, api.ToolContent{Type: api.ContentText, Text: "files written: " + strings.Join(files, ", ")})
		}
	}
	return out, nil
}

// codeResult is run_code's result: stdout (and stderr, labelled) as text, an error when the
// code failed; structuredContent has all of it.
func codeResult(res api.ExecResult) api.ToolResult {
	sc := map[string]any{"exitCode": res.ExitCode, "stdout": res.Stdout, "stderr": res.Stderr, "durationMs": res.DurationMs}
	var b strings.Builder
	b.WriteString(res.Stdout)
	if res.Stderr != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[stderr]\n" + res.Stderr)
	}
	failed := res.ExitCode != 0 || res.TimedOut
	switch {
	case res.TimedOut:
		sc["timedOut"] = true
		b.WriteString("\n[timed out]")
	case res.OOMKilled:
		sc["oomKilled"] = true
		b.WriteString("\n[killed at the memory limit]")
	case failed:
		b.WriteString("\n[exit status " + strconv.Itoa(res.ExitCode) + "]")
	}
	return api.ToolResult{Content: []api.ToolContent{{Type: api.ContentText, Text: b.String()}}, IsError: failed, StructuredContent: sc}
}

// withFiles opens the workspace's files for a built-in call.
func withFiles(ctx context.Context, g *Gateway, inv *invocation, fn func(f *manager.Files) (api.ToolResult, error)) (api.ToolResult, error) {
	p, err := g.workspace(ctx, inv)
	if err != nil {
		return api.ToolResult{}, err
	}
	defer p.release()
	f, err := g.m.Files(ctx, p.id)
	if err != nil {
		return api.ToolResult{}, err
	}
	defer f.Close()
	return fn(f)
}

// fileError is a files error as a tool's failure (a missing file is the model's to handle),
// or, for anything but the caller's path, an error.
func fileError(err error, p string) (api.ToolResult, error) {
	for _, kind := range []error{errdefs.ErrNotFound, errdefs.ErrInvalidArgument, errdefs.ErrPermissionDenied, errdefs.ErrNoSpace, errdefs.ErrTooLarge} {
		if errors.Is(err, kind) {
			return errorResult("%s: %v", p, err), nil
		}
	}
	return api.ToolResult{}, err
}

func readFile(ctx context.Context, g *Gateway, inv *invocation) (api.ToolResult, error) {
	return withFiles(ctx, g, inv, func(f *manager.Files) (api.ToolResult, error) {
		p, err := f.Abs(str(inv.args, "path"))
		if err != nil {
			return fileError(err, str(inv.args, "path"))
		}
		file, info, err := f.Open(p)
		if err != nil {
			return fileError(err, p)
		}
		defer file.Close()
		limit := g.cfg.Limits.MaxResultBytes
		if info.Size > int64(limit) {
			return errorResult("%s is %d bytes; read_file returns at most %d", p, info.Size, limit), nil
		}
		b, err := io.ReadAll(io.LimitReader(file, int64(limit)))
		if err != nil {
			return fileError(err, p)
		}
		sc := map[string]any{"path": p, "size": len(b)}
		if utf8.Valid(b) {
			return api.ToolResult{Content: []api.ToolContent{{Type: api.ContentText, Text: string(b)}}, StructuredContent: sc}, nil
		}
		sc["encoding"] = "base64"
		return api.ToolResult{Content: []api.ToolContent{{Type: api.ContentResource, URI: "file://" + p, MimeType: http.DetectContentType(b),
			Data: base64.StdEncoding.EncodeToString(b)}}, StructuredContent: sc}, nil
	})
}

func writeFile(ctx context.Context, g *Gateway, inv *invocation) (api.ToolResult, error) {
	content := []byte(str(inv.args, "content"))
	if str(inv.args, "encoding") == "base64" {
		b, err := base64.StdEncoding.DecodeString(string(content))
		if err != nil {
			return api.ToolResult{}, &errdefs.FieldError{Field: "/content", Rule: "encoding", Code: api.CodeInvalidArguments, Message: "content is not base64: " + err.Error()}
		}
		content = b
	}
	return withFiles(ctx, g, inv, func(f *manager.Files) (api.ToolResult, error) {
		p, err := f.Abs(str(inv.args, "path"))
		if err != nil {
			return fileError(err, str(inv.args, "path"))
		}
		info, err := f.Write(p, bytes.NewReader(content), 0o644, int64(len(content))+1, true)
		if err != nil {
			return fileError(err, p)
		}
		return api.ToolResult{Content: []api.ToolContent{{Type: api.ContentText, Text: fmt.Sprintf("wrote %d bytes to %s", info.Size, p)}},
			StructuredContent: map[string]any{"path": p, "size": info.Size}}, nil
	})
}

func listFiles(ctx context.Context, g *Gateway, inv *invocation) (api.ToolResult, error) {
	return withFiles(ctx, g, inv, func(f *manager.Files) (api.ToolResult, error) {
		arg := str(inv.args, "path")
		if arg == "" {
			arg = "."
		}
		p, err := f.Abs(arg)
		if err != nil {
			return fileError(err, arg)
		}
		list, err := f.List(p)
		if err != nil {
			return fileError(err, p)
		}
		var b strings.Builder
		entries := make([]any, 0, len(list))
		for _, fi := range list {
			name := fi.Name
			if fi.Type == api.FileDir {
				name += "/"
			}
			fmt.Fprintf(&b, "%s\t%d\n", name, fi.Size)
			entries = append(entries, map[string]any{"name": fi.Name, "type": fi.Type, "size": fi.Size})
		}
		if len(list) == 0 {
			b.WriteString("(empty)\n")
		}
		return api.ToolResult{Content: []api.ToolContent{{Type: api.ContentText, Text: b.String()}},
			StructuredContent: map[string]any{"path": p, "entries": entries}}, nil
	})
}

// httpFetch is http_fetch: a URL the caller chose, so it always leaves through a sandbox's egress
// proxy, never from the daemon.
func httpFetch(ctx context.Context, g *Gateway, inv *invocation) (api.ToolResult, error) {
	u, err := url.Parse(str(inv.args, "url"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return api.ToolResult{}, &errdefs.FieldError{Field: "/url", Rule: "url", Code: api.CodeInvalidArguments, Message: fmt.Sprintf("%q is not an http or https URL", str(inv.args, "url"))}
	}
	method := str(inv.args, "method")
	if method == "" {
		method = http.MethodGet
	}
	hdr := http.Header{}
	if hs, ok := inv.args["headers"].(map[string]any); ok {
		for k, v := range hs {
			if s, ok := v.(string); ok && k != "" && !strings.ContainsAny(k, " :\r\n") {
				hdr.Set(k, stripBreaks(s))
			}
		}
	}
	var body []byte
	if b, ok := inv.args["body"].(string); ok {
		body = []byte(b)
	}
	proxy, release, err := g.egressOf(ctx, inv, inv.tool.sandbox, "workspace")
	if err != nil {
		return api.ToolResult{}, err
	}
	defer release()
	return g.send(ctx, proxy, method, u, hdr, body)
}
