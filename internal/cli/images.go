package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/image"
)

// The image verbs act on the data dir's store directly (no daemon needed; a daemon on that data
// dir sees the images at once), or, when AIRLOCK_HOST names a daemon as for the client verbs,
// through that daemon's image API. --data-dir or --config asks for the local store.

// imageStore is where the image verbs act: localImages or daemonImages.
type imageStore interface {
	pull(ctx context.Context, ref string) (api.Image, error)
	list(ctx context.Context) ([]api.Image, error)
	remove(ctx context.Context, ref string) (api.ImageRemoval, error)
	prune(ctx context.Context) (api.ImageRemoval, error)
	// fail reports err of verb and returns the exit status for it.
	fail(verb string, err error) int
}

var (
	_ imageStore = localImages{}
	_ imageStore = daemonImages{}
)

// viaDaemon reports whether the image verbs go through the daemon in AIRLOCK_HOST.
func viaDaemon(h *hostFlags) bool {
	return os.Getenv("AIRLOCK_HOST") != "" && h.dataDir == "" && h.configFile == ""
}

// openImages returns the store the image verbs act on; code >= 0 means: exit with it.
func openImages(e *env, h *hostFlags, verb string) (st imageStore, code int) {
	if viaDaemon(h) {
		r := &remote{env: e, name: verb}
		if code := r.dial(); code >= 0 {
			return nil, code
		}
		return daemonImages{r}, -1
	}
	cfg, err := h.load(nil)
	if err == nil {
		dir, opts := cfg.Images.Store(cfg.DataDir)
		var s *image.Store
		if s, err = image.Open(dir, opts, e.log); err == nil {
			return localImages{e, s}, -1
		}
	}
	fmt.Fprintf(e.stderr, "airlock %s: %s\n", verb, describe(err))
	return nil, exitError
}

// localImages is the data dir's store, opened by this process.
type localImages struct {
	e *env
	s *image.Store
}

// pull shows the layers' progress on stderr.
func (l localImages) pull(ctx context.Context, ref string) (api.Image, error) {
	f, ok := l.e.stderr.(*os.File)
	view := &progressView{w: l.e.stderr, tty: ok && isTerminal(f), last: map[string]string{}}
	img, err := l.s.Pull(ctx, ref, view.update)
	return img.API(), err
}

func (l localImages) list(context.Context) ([]api.Image, error) {
	imgs, err := l.s.List()
	return image.APIs(imgs), err
}

func (l localImages) remove(_ context.Context, ref string) (api.ImageRemoval, error) {
	c, err := l.s.Remove(ref)
	return c.API(), err
}

func (l localImages) prune(context.Context) (api.ImageRemoval, error) {
	c, err := l.s.GC()
	return c.API(), err
}

func (l localImages) fail(verb string, err error) int {
	msg := err.Error()
	if fe, ok := errors.AsType[*errdefs.FieldError](err); ok {
		msg = fe.Message // the field is the REF argument
	}
	fmt.Fprintf(l.e.stderr, "airlock %s: %s\n", verb, msg)
	return exitError
}

// daemonImages is the store of the daemon in AIRLOCK_HOST.
type daemonImages struct{ r *remote }

// pull says where the image goes; the daemon reports no progress.
func (d daemonImages) pull(ctx context.Context, ref string) (api.Image, error) {
	fmt.Fprintf(d.r.stderr, "pulling %s on the daemon at %s…\n", ref, d.r.c.BaseURL())
	return d.r.c.Pull(ctx, ref)
}

func (d daemonImages) list(ctx context.Context) ([]api.Image, error) { return d.r.c.Images(ctx) }

func (d daemonImages) remove(ctx context.Context, ref string) (api.ImageRemoval, error) {
	return d.r.c.RemoveImage(ctx, ref)
}

func (d daemonImages) prune(ctx context.Context) (api.ImageRemoval, error) {
	return d.r.c.PruneImages(ctx)
}

func (d daemonImages) fail(_ string, err error) int {
	return d.r.fail(err, map[string]string{"ref": ""}) // the field is the REF argument
}

// pullCmd is `airlock pull REF`: pull an image into the data dir's store, or the daemon's.
// Progress goes to stderr, the digest to stdout.
func pullCmd(e *env, args []string) int {
	fs := flag.NewFlagSet("pull", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var h hostFlags
	h.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(e.stderr, "usage: airlock pull [--data-dir DIR] [--config FILE] REF")
		fmt.Fprintln(e.stderr, "With AIRLOCK_HOST set and neither flag, the daemon there pulls it (key in AIRLOCK_TOKEN).")
		return exitUsage
	}
	st, code := openImages(e, &h, "pull")
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	img, err := st.pull(ctx, pos[0])
	if err != nil {
		return st.fail("pull", err)
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

// imagesCmd is `airlock images ls|rm|prune`: the data dir's image store, or the daemon's.
func imagesCmd(e *env, args []string) int {
	sub := "ls"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	verb := "images " + sub
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var h hostFlags
	h.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	switch {
	case sub == "rm" && len(pos) == 0:
		fmt.Fprintln(e.stderr, "usage: airlock images rm REF...")
		return exitUsage
	case (sub == "ls" || sub == "prune") && len(pos) > 0:
		fmt.Fprintf(e.stderr, "usage: airlock images %s\n", sub)
		return exitUsage
	case sub != "ls" && sub != "rm" && sub != "prune":
		fmt.Fprintf(e.stderr, "airlock images: unknown subcommand %q (ls, rm, prune)\n", sub)
		return exitUsage
	}
	st, code := openImages(e, &h, verb)
	if code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	switch sub {
	case "ls":
		imgs, err := st.list(ctx)
		if err != nil {
			return st.fail(verb, err)
		}
		if *asJSON {
			printJSON(e.stdout, orEmpty(imgs))
			return 0
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REF\tDIGEST\tLAYERS\tSIZE\tPULLED")
		for _, img := range imgs {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", img.Ref, shortDigest(img.Digest, 12), len(img.Layers), megabytes(img.Size),
				img.Pulled.Local().Format(time.DateTime))
		}
		tw.Flush()
	case "rm":
		status := 0
		for _, ref := range pos {
			rm, err := st.remove(ctx, ref)
			if err != nil {
				if status = max(status, st.fail(verb, err)); status != exitError {
					return status // the daemon is unreachable, or Ctrl-C
				}
				continue
			}
			if *asJSON {
				printJSON(e.stdout, rm)
			} else {
				fmt.Fprintln(e.stdout, ref)
			}
			if rm.LayersInUse > 0 {
				fmt.Fprintf(e.stderr, "airlock %s: %s: %d layers kept while a live sandbox uses them (`airlock images prune` later)\n", verb, ref, rm.LayersInUse)
			}
		}
		return status
	case "prune":
		rm, err := st.prune(ctx)
		if err != nil {
			return st.fail(verb, err)
		}
		if *asJSON {
			printJSON(e.stdout, rm)
			return 0
		}
		fmt.Fprintf(e.stdout, "removed %d layers, freed %s", rm.LayersRemoved, megabytes(rm.BytesFreed))
		if rm.LayersInUse > 0 {
			fmt.Fprintf(e.stdout, "; %d in use kept", rm.LayersInUse)
		}
		fmt.Fprintln(e.stdout)
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
