package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/airlockrun/airlock/internal/image"
)

// openImages opens the image store of the data dir (<data-dir>/images).
func openImages(e *env, h *hostFlags) (*image.Store, error) {
	cfg, err := h.load(nil)
	if err != nil {
		return nil, err
	}
	dir, opts := cfg.ImageStore()
	return image.Open(dir, opts, e.log)
}

// pullCmd is `airlock pull REF`: pull an image into the data dir's store (the daemon need not
// run; it sees the image at once). Progress goes to stderr, the digest to stdout.
func pullCmd(e *env, args []string) int {
	fs := flag.NewFlagSet("pull", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var h hostFlags
	h.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintln(e.stderr, "usage: airlock pull [--data-dir DIR] [--config FILE] REF")
		return 2
	}
	s, err := openImages(e, &h)
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock pull:", describe(err))
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f, ok := e.stderr.(*os.File)
	view := &progressView{w: e.stderr, tty: ok && isTerminal(f), last: map[string]string{}}
	img, err := s.Pull(ctx, pos[0], view.update)
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock pull:", describe(err))
		return 1
	}
	fmt.Fprintf(e.stderr, "pulled %s (%s)\n", img.Ref, megabytes(img.Size))
	fmt.Fprintln(e.stdout, img.Digest)
	return 0
}

// progressView shows a pull's layers on a terminal as one line each, redrawn in place; on
// anything else, as a line per change of a layer's status.
type progressView struct {
	w     io.Writer
	tty   bool
	order []string          // layers in order of their first line
	last  map[string]string // layer → the status last printed
}

func (v *progressView) update(p image.Progress) {
	line := fmt.Sprintf("%s  %s/%s  %s", shortDigest(p.Layer, 8), megabytesNum(p.Done), megabytes(p.Total), p.Status)
	if !v.tty {
		if v.last[p.Layer] != p.Status {
			v.last[p.Layer] = p.Status
			fmt.Fprintln(v.w, line)
		}
		return
	}
	i := -1
	for j, l := range v.order {
		if l == p.Layer {
			i = j
		}
	}
	if i < 0 {
		v.order = append(v.order, p.Layer)
		fmt.Fprintf(v.w, "%s\n", line)
		return
	}
	// Up to the layer's line, rewrite it, back down.
	up := len(v.order) - i
	fmt.Fprintf(v.w, "\x1b[%dA\r\x1b[K%s\x1b[%dB\r", up, line, up)
}

// imagesCmd is `airlock images ls|rm|prune`: the data dir's image store.
func imagesCmd(e *env, args []string) int {
	sub := "ls"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("images "+sub, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var h hostFlags
	h.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	switch {
	case sub == "rm" && len(pos) == 0:
		fmt.Fprintln(e.stderr, "usage: airlock images rm REF...")
		return 2
	case (sub == "ls" || sub == "prune") && len(pos) > 0:
		fmt.Fprintf(e.stderr, "usage: airlock images %s\n", sub)
		return 2
	case sub != "ls" && sub != "rm" && sub != "prune":
		fmt.Fprintf(e.stderr, "airlock images: unknown subcommand %q (ls, rm, prune)\n", sub)
		return 2
	}
	s, err := openImages(e, &h)
	if err != nil {
		fmt.Fprintln(e.stderr, "airlock images:", describe(err))
		return 1
	}
	switch sub {
	case "ls":
		imgs, err := s.List()
		if err != nil {
			fmt.Fprintln(e.stderr, "airlock images ls:", err)
			return 1
		}
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			enc.Encode(imgs)
			return 0
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REF\tDIGEST\tSIZE\tPULLED")
		for _, img := range imgs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", img.Ref, shortDigest(img.Digest, 12), megabytes(img.Size), img.Pulled.Local().Format(time.DateTime))
		}
		tw.Flush()
	case "rm":
		code := 0
		for _, ref := range pos {
			if err := s.Remove(ref); err != nil {
				fmt.Fprintln(e.stderr, "airlock images rm:", describe(err))
				code = 1
				continue
			}
			fmt.Fprintln(e.stdout, ref)
		}
		return code
	case "prune":
		n, freed, err := s.GC()
		if err != nil {
			fmt.Fprintln(e.stderr, "airlock images prune:", err)
			return 1
		}
		fmt.Fprintf(e.stdout, "removed %d layers, freed %s\n", n, megabytes(freed))
	}
	return 0
}

// shortDigest is "sha256:" and the first n hex digits.
func shortDigest(d string, n int) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= n {
		return d
	}
	return algo + ":" + hex[:n]
}

func megabytes(n int64) string    { return megabytesNum(n) + " MB" }
func megabytesNum(n int64) string { return fmt.Sprintf("%.1f", float64(n)/1e6) }
