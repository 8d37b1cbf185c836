package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// StartClient starts bin's `airlock serve` with a new data dir under dir and a config file holding
// cfg (JSON), creates an API key of tenant "bench" there, and returns an SDK client with that key
// and a stop that closes the client's connections and ends the daemon.
func StartClient(bin, dir, cfg string) (*client.Client, func(), error) {
	return StartClientLogged(bin, dir, cfg, nil)
}

// StartClientLogged is StartClient that also copies the daemon's stderr (its log) to log, when
// log is not nil.
func StartClientLogged(bin, dir, cfg string, log io.Writer) (*client.Client, func(), error) {
	data := filepath.Join(dir, "data")
	cfgFile := filepath.Join(dir, "airlock.json")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		return nil, nil, err
	}
	key, err := exec.Command(bin, "keys", "create", "--tenant", "bench", "--data-dir", data).Output()
	if err != nil {
		return nil, nil, fmt.Errorf("keys create: %w", err)
	}
	url, stopDaemon, err := StartLogged(bin, data, cfgFile, log)
	if err != nil {
		return nil, nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 100}
	c, err := client.New(url, strings.TrimSpace(string(key)), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		stopDaemon()
		return nil, nil, err
	}
	return c, func() { tr.CloseIdleConnections(); stopDaemon() }, nil
}

// Terminate ends sandbox id through c. A failure changes no figure (stopping the daemon ends what
// is left), so it is said on stderr, not returned.
func Terminate(ctx context.Context, c *client.Client, id string) {
	if _, err := c.Terminate(ctx, id); err != nil {
		fmt.Fprintf(os.Stderr, "bench: terminate %s: %v\n", id, err)
	}
}

// DeleteSnapshot deletes snapshot id through c; as for Terminate, a failure is said on stderr.
func DeleteSnapshot(ctx context.Context, c *client.Client, id string) {
	if _, err := c.DeleteSnapshot(ctx, id); err != nil {
		fmt.Fprintf(os.Stderr, "bench: delete snapshot %s: %v\n", id, err)
	}
}

// ExecError is the error of an exec, what, that could not run (err) or ran and failed (res says
// how).
func ExecError(what string, res api.ExecResult, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %+v", what, res)
}

// Settle waits until every pool of the daemon c speaks to is full (no sandbox warming), so that
// no refill runs while a runner is timed; it gives up after within, polling every poll.
func Settle(ctx context.Context, c *client.Client, within, poll time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		ps, err := c.Pools(ctx)
		if err != nil {
			return err
		}
		full := true
		for _, p := range ps {
			full = full && p.Ready == p.Size && p.Warming == 0
		}
		if full {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon's pools did not fill within %v: %+v", within, ps)
		}
		time.Sleep(poll)
	}
}
