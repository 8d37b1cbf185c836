// Package serve starts `airlock serve` for the benchmarks that measure through the daemon.
package serve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Start starts bin's `airlock serve` on a free loopback port with data dir data and config
// file cfg, and returns its URL and a stop that ends it gracefully (its sandboxes with it).
func Start(bin, data, cfg string) (url string, stop func(), err error) {
	return StartLogged(bin, data, cfg, nil)
}

// StartLogged is Start that also copies every line the daemon writes to its stderr (its log, and
// a panic's trace should it crash) to log, when log is not nil.
func StartLogged(bin, data, cfg string, log io.Writer) (url string, stop func(), err error) {
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", cfg)
	cmd.Env = append(os.Environ(), "AIRLOCK_LOG=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt) // it fails only when the daemon ended already: Wait says how
		if err := cmd.Wait(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: airlock serve:", err)
		}
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		// Whatever ends the scan, the pipe is drained to the end: a daemon whose stderr is not
		// read blocks once the pipe is full.
		defer func() { _, _ = io.Copy(io.Discard, stderr) }()
		for sc.Scan() {
			if log != nil {
				_, _ = io.WriteString(log, sc.Text()+"\n") // a copy for the reader: the scan goes on
			}
			if _, u, ok := strings.Cut(sc.Text(), "url="); ok {
				select {
				case urlc <- strings.Fields(u)[0]:
				default:
				}
			}
		}
	}()
	select {
	case u := <-urlc:
		return u, stop, nil
	case <-time.After(30 * time.Second):
		stop()
		return "", nil, errors.New("airlock serve did not start")
	}
}
