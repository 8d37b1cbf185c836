package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/test/bench/serve"
)

// daemon is one running `airlock serve` of the benchmark.
type daemon struct {
	c       *client.Client
	stop    func()
	data    string   // its data dir
	pid     int      // found in /proc: serve does not say
	log     *os.File // its stderr, copied by serve
	logPath string
}

// startDaemon starts a daemon in dir, its log in dir/daemon.log; before it starts, prepare (if
// not nil) may put files into its data dir.
func startDaemon(o options, dir string, prepare func(data string) error) (*daemon, error) {
	data := filepath.Join(dir, "data") // where serve.StartClient puts it
	if prepare != nil {
		if err := prepare(data); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d := &daemon{data: data, logPath: filepath.Join(dir, "daemon.log")}
	var err error
	if d.log, err = os.Create(d.logPath); err != nil {
		return nil, err
	}
	if d.c, d.stop, err = serve.StartClientLogged(o.airlock, dir, config(o), d.log); err != nil {
		d.log.Close()
		return nil, err
	}
	if d.pid, err = daemonPID(data); err != nil {
		d.stop()
		d.log.Close()
		return nil, err
	}
	return d, nil
}

// finish ends the daemon after err, the outcome of the measuring: the sandboxes b made are
// terminated, unless the daemon is gone, in which case the end of its log (its panic) is added
// to err.
func (d *daemon) finish(b *bench, err error) error {
	if d.exited() {
		err = errors.Join(err, fmt.Errorf("the daemon (pid %d) exited while it was measured; its log ends:\n%s", d.pid, d.crashLog()))
	} else if cerr := b.cleanup(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
	}
	d.stop()
	d.log.Close()
	return err
}

// exited says whether the daemon process has ended (it is a zombie until stop reaps it).
func (d *daemon) exited() bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(st, ')')
	return i < 0 || i+2 >= len(st) || st[i+2] == 'Z'
}

// crashLog is the daemon's panic or fatal error and what follows, up to 40 lines, or else the
// last 20 lines of its log.
func (d *daemon) crashLog() string {
	time.Sleep(200 * time.Millisecond) // serve copies the last lines
	b, _ := os.ReadFile(d.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	i := slices.IndexFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:")
	})
	if i < 0 {
		i = max(0, len(lines)-20)
	}
	return strings.Join(lines[i:min(len(lines), i+40)], "\n")
}

// compiledRe matches the line the wasm level logs when it has an interpreter ready: compiled
// anew, or loaded from its cache.
var compiledRe = regexp.MustCompile(`msg="compiled the (\w+) interpreter".* took=(\S+)`)

// compileTimes reads how long the daemon says it took to have each interpreter ready, waiting up
// to a second for n of them to be in its log.
func (d *daemon) compileTimes(n int) []langSeconds {
	for deadline := time.Now().Add(time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(d.logPath)
		var out []langSeconds
		for _, m := range compiledRe.FindAllStringSubmatch(string(b), -1) {
			if took, err := time.ParseDuration(m[2]); err == nil {
				out = append(out, langSeconds{Lang: m[1], MS: ms(took)})
			}
		}
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
	}
}

// daemonPID finds the `airlock serve --data-dir data` this program started: the process that is
// this one's child with that data dir on its command line.
func daemonPID(data string) (int, error) {
	var found []int
	for pid, p := range procs() {
		if p.ppid != os.Getpid() || !slices.Contains(p.argv, "serve") {
			continue
		}
		if i := slices.Index(p.argv, "--data-dir"); i >= 0 && i+1 < len(p.argv) && p.argv[i+1] == data {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("found %d daemons with data dir %s among this program's children, want 1", len(found), data)
	}
	return found[0], nil
}
