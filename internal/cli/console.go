package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/airlockrun/airlock/client"
)

// consoleCmd is `airlock console`: the web console's address on the daemon in AIRLOCK_HOST, with
// the key in AIRLOCK_TOKEN in its fragment (/ui/#key=…: a fragment never reaches a server; the
// page moves the key to the tab's sessionStorage and out of the address bar at once). --open
// opens it in the desktop's browser. Exit status 0; 1 when the daemon answered that it has no
// console; 2 for bad usage.
func consoleCmd(e *env, args []string) int {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	open := fs.Bool("open", false, "open the address in the desktop's browser (xdg-open, open)")
	noKey := fs.Bool("no-key", false, "print the address without the key (sign in by pasting it)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: airlock console [--open] [--no-key]")
		fs.PrintDefaults()
		fmt.Fprintln(e.stderr, "\nThe daemon is found in AIRLOCK_HOST (default "+client.DefaultHost+"), its key in AIRLOCK_TOKEN.")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	base := strings.TrimSuffix(client.HostURL(os.Getenv("AIRLOCK_HOST")), "/")
	addr, key := base+"/ui/", os.Getenv("AIRLOCK_TOKEN")
	if key != "" && !*noKey {
		addr += "#key=" + url.QueryEscape(key)
	}
	if msg := consoleProblem(base); msg != "" {
		fmt.Fprintln(e.stderr, "airlock console:", msg)
		if strings.HasPrefix(msg, "the daemon has no console") {
			return exitError
		}
	}
	fmt.Fprintln(e.stdout, addr)
	if key == "" {
		fmt.Fprintln(e.stderr, "airlock console: AIRLOCK_TOKEN is not set: sign in on the page by pasting a key")
	}
	if *open {
		if err := openBrowser(addr); err != nil {
			fmt.Fprintln(e.stderr, "airlock console: could not open a browser:", err, "(open the address above by hand)")
		}
	}
	return 0
}

// consoleProblem asks the daemon for the console's page: "" when it serves it, else why not.
func consoleProblem(base string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, base+"/ui/", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Sprintf("no daemon answers at %s (%v); the address is printed all the same", base, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // a HEAD's body is empty
	resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		return "the daemon has no console: its binary was built without the console's assets (build it with make build)"
	}
	return ""
}

// openBrowser opens addr with the desktop's opener. The key is in its arguments, which other
// users of this machine could read in the process list while the opener runs.
func openBrowser(addr string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, addr)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // the opener's own status says nothing of the page
	return nil
}
