package drivertest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Dialects a level's commands are written in (Options.Lang).
const (
	// LangShell is POSIX shell, run as /bin/sh -c, with coreutils, python3 and the usual commands
	// beside it: the default.
	LangShell = ""
	// LangPython is Python 3, run as python3 -c, for levels with an interpreter but no shell (no
	// /bin/sh, maybe no processes, sockets, users or signals at all). A Python form checks only
	// what holds on any level that has python3: "the host's secret cannot be read", never "there
	// is no /proc".
	LangPython = "python"
)

// Script is one command of a case in each dialect it has a form in; a form is "" where the
// command has none. Both forms check the same property: do the bad thing, and print what the
// case looks for.
type Script struct {
	Sh string // POSIX shell, run as /bin/sh -c Sh
	Py string // Python 3, run as python3 -c Py
}

// Python reports whether the level's dialect is Python.
func (h *Harness) Python() bool { return h.opts.Lang == LangPython }

// Command is the argv running s in the level's dialect. It fails t when s has no form in it.
func (h *Harness) Command(t *testing.T, s Script) []string {
	t.Helper()
	if h.Python() {
		if s.Py == "" {
			t.Fatalf("case %s has no python form; give it one or name a skip", h.name)
		}
		return []string{"python3", "-c", s.Py}
	}
	if s.Sh == "" {
		t.Fatalf("case %s has no shell form", h.name)
	}
	return []string{"/bin/sh", "-c", s.Sh}
}

// Exec runs s in the level's dialect with a timeout and captured output.
func (h *Harness) Exec(t *testing.T, sb driver.Sandbox, timeout time.Duration, s Script) sandbox.ExecResult {
	t.Helper()
	if h.opts.Slowdown > 1 {
		timeout = time.Duration(float64(timeout) * h.opts.Slowdown)
	}
	return ExecReq(t, sb, timeout, sandbox.ExecRequest{Command: h.Command(t, s)})
}

// part runs one part of the case as the subtest name, unless Options.Skip names it "Case/name".
func (h *Harness) part(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		if why, ok := h.opts.Skip[h.name+"/"+name]; ok {
			t.Skipf("level %s cannot run this part: %s", h.D.Name(), why)
		}
		f(t)
	})
}

// pyLit is v, a string, number or list of them, as a Python literal (JSON writes them as Python
// does).
func pyLit(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
