package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/internal/sandbox"
)

// The streamed form must be byte-for-byte what encoding/json produces.
func TestWriteResultMatchesEncodingJSON(t *testing.T) {
	for _, out := range []string{"", "plain\n", "quote \" back \\ tab \t nul \x00 ctl \x1f", "<html>&", "ünïcødé ✓ \u2028",
		"bad utf8 \xff\xfe end", strings.Repeat("\x00", 1000)} {
		res := sandbox.ExecResult{ExecutionID: "exec_1", ExitCode: 3, Stdout: out, Stderr: "e:" + out,
			LimitEvents: []sandbox.LimitEvent{{Type: sandbox.EventLimitOutput, Message: "m"}}}
		want, _ := json.MarshalIndent(res, "", "  ")
		var got bytes.Buffer
		if err := writeResult(&got, res); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want)+"\n" {
			t.Fatalf("for %q:\n got %s\nwant %s", out, got.String(), want)
		}
	}
}
