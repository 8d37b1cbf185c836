package guest

import (
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/sandbox"
)

// Terminal helpers both sides use: the host on a terminal's master init handed it, init on the
// master of a terminal it relays (a gVisor terminal cannot be handed to the host).

// LastByte is a writer that remembers the last byte written through it (TypeEOF ends a partial
// line first).
type LastByte struct {
	W    io.Writer
	n    int64
	last byte
}

func (l *LastByte) Write(p []byte) (int, error) {
	n, err := l.W.Write(p)
	if n > 0 {
		l.n += int64(n)
		l.last = p[n-1]
	}
	return n, err
}

// TypeEOF ends a terminal's input as a user would, with its EOF character (^D): once after a
// partial line (what went through w), which it ends, and once more to end the input. A terminal
// in raw mode gets nothing: the program reading it decides what ends its input.
func TypeEOF(master *os.File, w *LastByte) {
	rc, err := master.SyscallConn()
	if err != nil {
		return
	}
	var t *unix.Termios
	cerr := rc.Control(func(fd uintptr) { t, err = unix.IoctlGetTermios(int(fd), unix.TCGETS) })
	if cerr != nil || err != nil || t.Lflag&unix.ICANON == 0 {
		return
	}
	// A write fails only once the terminal is gone, and its input with it.
	eof := []byte{t.Cc[unix.VEOF]}
	if w.n > 0 && w.last != '\n' {
		_, _ = master.Write(eof)
	}
	_, _ = master.Write(eof)
}

// SetWinsize sets a terminal's size; its kernel sends SIGWINCH to its foreground process group.
// A size with a zero side is ignored, and so is a failure: it fails only once the terminal is
// gone, and what would be resized with it.
func SetWinsize(master *os.File, ws sandbox.Winsize) {
	if ws.Rows == 0 || ws.Cols == 0 {
		return
	}
	if rc, err := master.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols})
		})
	}
}
