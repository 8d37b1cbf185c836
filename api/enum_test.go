package api

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestEnums: every enum tag (the values the OpenAPI document, and so the SDKs' types, allow) lists
// exactly the constants the daemon uses for that field.
func TestEnums(t *testing.T) {
	for _, c := range []struct {
		typ   any
		field string
		want  []string
	}{
		{Spec{}, "Isolation", []string{LevelProcess, LevelContainer, LevelWasm, LevelMicroVM, LevelEnclave}},
		{Spec{}, "Runtime", []string{"runsc", "runc"}},
		{Spec{}, "User", []string{UserAgent, UserRoot}},
		{Network{}, "EgressPolicy", []string{EgressNone, EgressRestricted, EgressOpen}},
		{Sandbox{}, "Status", []string{StatusProvisioning, StatusReady, StatusRunning, StatusPaused, StatusCompleted, StatusFailed, StatusTerminated}},
		{Execution{}, "Status", []string{ExecRunning, ExecDone, ExecLost}},
		{LogEntry{}, "Stream", []string{StreamStdout, StreamStderr, StreamEvent}},
		{Frame{}, "Type", []string{FrameStart, FrameStdin, FrameResize, FrameEOF, FrameSignal, FrameStarted, FrameStdout, FrameStderr, FrameExit, FrameError}},
		{FileInfo{}, "Type", []string{FileRegular, FileDir, FileSymlink, FileOther}},
		{WebhookDelivery{}, "Status", []string{DeliveryPending, DeliveryDelivered, DeliveryFailed, DeliveryDropped}},
		{CompatCreateRequest{}, "Mode", []string{LevelContainer, LevelWasm, LevelProcess}},
		{CompatSandbox{}, "Status", []string{StatusProvisioning, StatusReady, StatusRunning, CompatStatusDestroyed, CompatStatusError}},
		{CompatRun{}, "Status", []string{"running", "done", "failed"}},
		{PoolStatus{}, "Source", []string{"config", "api"}},
		{Tool{}, "Source", []string{ToolSourceBuiltin, ToolSourceConfig, ToolSourceAPI, ToolSourceMCP}},
		{Tool{}, "Backend", []string{ToolBackendBuiltin, ToolBackendExec, ToolBackendHTTP, ToolBackendMCP}},
		{ExecBackend{}, "Stdin", []string{ToolStdinJSON, ToolStdinNone}},
		{ExecBackend{}, "Output", []string{ToolOutputText, ToolOutputJSON}},
		{HTTPBackend{}, "Method", []string{"GET", "POST", "PUT", "PATCH", "DELETE"}},
		{HTTPBackend{}, "Egress", []string{ToolEgressSandbox, ToolEgressDaemon}},
		{ToolSandbox{}, "Reuse", []string{ReuseCaller, ReuseTool, ReuseCall}},
		{ToolContent{}, "Type", []string{ContentText, ContentImage, ContentAudio, ContentResource}},
		{ToolServerInfo{}, "Source", []string{ToolSourceConfig, ToolSourceAPI}},
		{ToolServerInfo{}, "Transport", []string{TransportStdio, TransportHTTP}},
		{ToolPolicy{}, "Source", []string{PolicySourceConfig, PolicySourceAdmin, PolicySourceTenant}},
	} {
		f, ok := reflect.TypeOf(c.typ).FieldByName(c.field)
		if !ok {
			t.Errorf("%T has no field %s", c.typ, c.field)
			continue
		}
		got := strings.Split(f.Tag.Get("enum"), ",")
		if !slices.Equal(got, c.want) {
			t.Errorf("%T.%s: enum %q, want %q", c.typ, c.field, got, c.want)
		}
	}
}
