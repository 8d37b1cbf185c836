package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"unicode/utf8"

	"github.com/airlockrun/airlock/internal/sandbox"
)

// writeResult prints the exec result object. The two output fields can be 10 MiB each and grow
// up to six-fold when escaped (a NUL byte is \u0000), so they are escaped straight into the
// output instead of through json.Marshal, which would hold the whole document in memory.
func writeResult(w io.Writer, res sandbox.ExecResult) error {
	stdout, stderr := res.Stdout, res.Stderr
	res.Stdout, res.Stderr = "", ""
	small, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	// small is `{ "executionId": ..., "exitCode": N, "stdout": "", "stderr": "", ...}`; splice the
	// streamed strings in place of the two empty ones.
	// bw's first error sticks: the Flush below returns it, so the writes before it are not checked.
	bw := bufio.NewWriterSize(w, 64<<10)
	rest := small
	for _, f := range []struct{ key, val string }{{`"stdout": ""`, stdout}, {`"stderr": ""`, stderr}} {
		i := indexOf(rest, f.key)
		if i < 0 {
			continue
		}
		_, _ = bw.Write(rest[:i+len(f.key)-1])
		escapeJSON(bw, f.val)
		_ = bw.WriteByte('"')
		rest = rest[i+len(f.key):]
	}
	_, _ = bw.Write(rest)
	_ = bw.WriteByte('\n')
	return bw.Flush()
}

func indexOf(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}

// escapeJSON writes s as the inside of a JSON string, as encoding/json would (invalid UTF-8
// becomes U+FFFD). w's first error sticks, for its Flush to return: the writes are not checked.
func escapeJSON(w *bufio.Writer, s string) {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				_ = w.WriteByte('\\')
				_ = w.WriteByte(c)
			case c == '\n':
				_, _ = w.WriteString(`\n`)
			case c == '\r':
				_, _ = w.WriteString(`\r`)
			case c == '\t':
				_, _ = w.WriteString(`\t`)
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				_, _ = w.WriteString(`\u00`)
				_ = w.WriteByte(hex[c>>4])
				_ = w.WriteByte(hex[c&0xf])
			default:
				_ = w.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			_, _ = w.WriteString(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			_, _ = w.WriteString(`\u202`)
			_ = w.WriteByte(hex[r&0xf])
		default:
			_, _ = w.WriteString(s[i : i+size])
		}
		i += size
	}
}
