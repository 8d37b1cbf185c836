package cli

import (
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/client"
)

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// makeRaw puts the terminal fd in raw mode (as cfmakeraw does: no echo, no line editing, no
// signals from keys, no output processing), so that every key reaches the sandbox's terminal.
// The returned function restores the previous mode; calling it again does nothing.
func makeRaw(fd int) (restore func(), err error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	var once sync.Once
	// A terminal that cannot be restored stays raw: there is nothing more to do.
	return func() { once.Do(func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }) }, nil
}

// windowSize is the terminal's size, or 0, 0 when it cannot tell.
func windowSize(fd int) (rows, cols uint16) {
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return ws.Row, ws.Col
}

// forwardResize sends the terminal's new size to out on every SIGWINCH, dropping a size the
// sandbox has not taken yet for the newer one, until stop is called.
func forwardResize(fd int, out chan client.Winsize) (stop func()) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-winch:
				rows, cols := windowSize(fd)
				select {
				case <-out: // stale
				default:
				}
				out <- client.Winsize{Rows: rows, Cols: cols}
			}
		}
	})
	return func() {
		signal.Stop(winch)
		close(done)
		wg.Wait()
	}
}
