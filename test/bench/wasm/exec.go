package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/test/bench/stats"
)

// callTimeout bounds one API call; the first exec after a start with an empty cache waits for
// CPython to compile, which takes a while on a busy host.
const callTimeout = 5 * time.Minute

// bench is the measuring against one daemon, with every sandbox it made and has not ended yet.
type bench struct {
	d     *daemon
	o     options
	avail []lang // the languages the wasm level has here

	mu  sync.Mutex // guards ids
	ids []string   // live sandboxes, for cleanup
}

// warmRow is one language's warm execs on both levels.
type warmRow struct {
	Lang    lang          `json:"lang"`
	Wasm    stats.Summary `json:"wasm"`
	Process stats.Summary `json:"process"`
	// Ratio is wasm over process, p50.
	Ratio float64 `json:"ratio_wasm_process_p50"`
	Met   bool    `json:"met"`
}

// coldRow is the create and first exec of fresh sandboxes of one level, for one language.
type coldRow struct {
	Level  string        `json:"level"`
	Lang   string        `json:"lang"`
	Create stats.Summary `json:"create"`
	First  stats.Summary `json:"first_exec"`
	// WarmP50 is the warm exec p50 of the same level and language, for comparison.
	WarmP50 float64 `json:"warm_p50_ms"`
}

// compileRun is what a daemon's first wasm sandbox took: its create and its first exec of each
// language, in the order run (python first).
type compileRun struct {
	CreateMS float64       `json:"create_ms"`
	First    []langSeconds `json:"first_exec"`
	// Ready is how long the daemon's log says each interpreter took to be ready: compiled, or
	// loaded from the cache.
	Ready []langSeconds `json:"daemon_log_ready"`
}

// langSeconds is one language's first exec.
type langSeconds struct {
	Lang string  `json:"lang"`
	MS   float64 `json:"ms"`
}

// compileReport compares a daemon's first execs with an empty cache and with a filled one.
type compileReport struct {
	Empty   compileRun `json:"empty_cache"`
	Cached  compileRun `json:"on_disk_cache"`
	CacheMB float64    `json:"cache_mb"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

// measure runs every section but the cached compile on b's daemon, in order: the first execs
// (an empty cache), warm execs, cold instances, idle memory.
func (b *bench) measure(rep *report) error {
	ctx, cancel := call()
	caps, err := b.d.c.Capabilities(ctx)
	cancel()
	if err != nil {
		return err
	}
	if rep.Unavailable, err = b.checkLevels(caps); err != nil {
		return err
	}
	progress("first execs after the start (the interpreters compile), %d language(s)", len(b.avail))
	if rep.Compile.Empty, err = b.firstExecs(b.avail); err != nil {
		return err
	}
	progress("warm execs: %d rounds after %d warm-up, %d execs each", b.o.rounds, b.o.warmup, 2*len(b.avail))
	if rep.Warm, err = b.warm(); err != nil {
		return err
	}
	progress("after idle: %d first execs per language after the worker went (%v idle)", b.o.cold, b.o.workerIdle)
	if rep.AfterIdle, err = b.afterIdle(rep.Warm); err != nil {
		return err
	}
	progress("cold instances: %d fresh sandboxes per level and language", b.o.cold)
	if rep.Cold, err = b.coldFirst(rep.Warm); err != nil {
		return err
	}
	progress("idle memory: %d sandboxes per level, %v idle", b.o.idle, b.o.settle)
	rep.Memory, err = b.idleMemory()
	return err
}

// checkLevels finds the languages the wasm level has here; both levels must be available.
func (b *bench) checkLevels(caps api.Capabilities) (unavailable []string, err error) {
	var wasm *api.LevelCapability
	for _, name := range levelNames {
		i := slices.IndexFunc(caps.Levels, func(l api.LevelCapability) bool { return l.Level == name })
		if i < 0 || !caps.Levels[i].Available {
			why := "not registered"
			if i >= 0 {
				why = caps.Levels[i].Reason + " (fix: " + caps.Levels[i].Fix + ")"
			}
			return nil, fmt.Errorf("isolation level %s is unavailable on this host: %s", name, why)
		}
		if name == api.LevelWasm {
			wasm = &caps.Levels[i]
		}
	}
	for _, l := range langs {
		if slices.Contains(wasm.Features, l.feature) {
			b.avail = append(b.avail, l)
		} else {
			unavailable = append(unavailable, l.Name+": the wasm level lists no "+l.feature+" (make wasm-runtimes)")
		}
	}
	if len(b.avail) == 0 {
		return unavailable, errors.New("the wasm level has no interpreter installed (make wasm-runtimes)")
	}
	return unavailable, nil
}

// create makes a sandbox of level with the default spec and no egress, and records it for
// cleanup. Its idle timeout is an hour: making a thousand idle sandboxes on a busy host takes
// longer than the default five minutes, which would end the first ones before they are counted.
func (b *bench) create(level string) (string, time.Duration, error) {
	ctx, cancel := call()
	defer cancel()
	t0 := time.Now()
	sb, err := b.d.c.Create(ctx, api.Spec{Isolation: level, Network: api.Network{EgressPolicy: api.EgressNone},
		Timeout: api.Timeout{IdleTimeoutSeconds: 3600}})
	d := time.Since(t0)
	if err != nil {
		return "", 0, fmt.Errorf("create a %s sandbox: %w", level, err)
	}
	b.mu.Lock()
	b.ids = append(b.ids, sb.ID)
	b.mu.Unlock()
	return sb.ID, d, nil
}

// terminate ends a sandbox create made.
func (b *bench) terminate(id string) error {
	ctx, cancel := call()
	defer cancel()
	if _, err := b.d.c.Terminate(ctx, id); err != nil {
		return fmt.Errorf("terminate %s: %w", id, err)
	}
	b.mu.Lock()
	b.ids = slices.DeleteFunc(b.ids, func(s string) bool { return s == id })
	b.mu.Unlock()
	return nil
}

// exec runs l's command in sandbox id and times the round trip; anything but exit 0 with "1\n"
// on stdout is an error.
func (b *bench) exec(id string, l lang) (time.Duration, error) {
	ctx, cancel := call()
	defer cancel()
	t0 := time.Now()
	res, err := b.d.c.Exec(ctx, id, api.ExecRequest{Command: l.Command})
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("exec %q in %s: %w", []string(l.Command), id, err)
	}
	if res.ExitCode != 0 || res.Stdout != want {
		return 0, fmt.Errorf("exec %q in %s: exit %d, stdout %q, stderr %q (want exit 0 and %q)",
			[]string(l.Command), id, res.ExitCode, res.Stdout, clip(res.Stderr, 600), want)
	}
	return d, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// firstExecs creates the daemon's first wasm sandbox and runs each language once in it, then
// terminates it: with an empty cache, its create or its first exec waits for the interpreters to
// compile.
func (b *bench) firstExecs(ls []lang) (compileRun, error) {
	id, d, err := b.create(api.LevelWasm)
	if err != nil {
		return compileRun{}, err
	}
	r := compileRun{CreateMS: ms(d)}
	for _, l := range ls {
		d, err := b.exec(id, l)
		if err != nil {
			return r, err
		}
		r.First = append(r.First, langSeconds{l.Name, ms(d)})
	}
	r.Ready = b.d.compileTimes(len(ls))
	return r, b.terminate(id)
}

// pair is one (level, language) an exec round runs.
type pair struct {
	level string
	lang  lang
}

func (b *bench) pairs() []pair {
	var ps []pair
	for _, l := range b.avail {
		for _, lv := range levelNames {
			ps = append(ps, pair{lv, l})
		}
	}
	return ps
}

// warm times the execs of one sandbox per level, every pair once per round in a random order.
func (b *bench) warm() ([]warmRow, error) {
	sbs := map[string]string{}
	for _, lv := range levelNames {
		id, _, err := b.create(lv)
		if err != nil {
			return nil, err
		}
		sbs[lv] = id
	}
	ps := b.pairs()
	samples := make([][]time.Duration, len(ps))
	for round := range b.o.warmup + b.o.rounds {
		if interrupted.Load() {
			return nil, errors.New("interrupted")
		}
		for _, i := range rand.Perm(len(ps)) {
			d, err := b.exec(sbs[ps[i].level], ps[i].lang)
			if err != nil {
				return nil, err
			}
			if round >= b.o.warmup {
				samples[i] = append(samples[i], d)
			}
		}
	}
	var rows []warmRow
	for i := 0; i < len(ps); i += 2 { // ps holds wasm, process per language
		r := warmRow{Lang: ps[i].lang, Wasm: stats.Summarize(samples[i]), Process: stats.Summarize(samples[i+1])}
		r.Ratio = stats.Ratio(r.Wasm.P50, r.Process.P50)
		r.Met = r.Wasm.P50 <= r.Lang.TargetMS
		rows = append(rows, r)
	}
	for _, id := range sbs {
		if err := b.terminate(id); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// afterIdleRow is a wasm sandbox's first exec after its worker went, and the next one.
type afterIdleRow struct {
	Lang  string        `json:"lang"`
	First stats.Summary `json:"first_exec_after_idle"`
	Next  stats.Summary `json:"next_exec"`
	// WarmP50 is the warm exec p50 of the language, for comparison.
	WarmP50 float64 `json:"warm_p50_ms"`
}

// afterIdle times, o.cold times per language, the first exec in one wasm sandbox after its
// worker went (the daemon's worker idle time and a second more without execs: the exec starts a
// worker, which loads the interpreter from the compilation cache) and the exec right after it.
func (b *bench) afterIdle(warm []warmRow) ([]afterIdleRow, error) {
	id, _, err := b.create(api.LevelWasm)
	if err != nil {
		return nil, err
	}
	rows := make([]afterIdleRow, len(b.avail))
	firsts := make([][]time.Duration, len(b.avail))
	nexts := make([][]time.Duration, len(b.avail))
	for range b.o.cold {
		for _, i := range rand.Perm(len(b.avail)) {
			if interrupted.Load() {
				return nil, errors.New("interrupted")
			}
			time.Sleep(b.o.workerIdle + time.Second)
			d, err := b.exec(id, b.avail[i])
			if err != nil {
				return nil, err
			}
			n, err := b.exec(id, b.avail[i])
			if err != nil {
				return nil, err
			}
			firsts[i], nexts[i] = append(firsts[i], d), append(nexts[i], n)
		}
	}
	for i, l := range b.avail {
		rows[i] = afterIdleRow{Lang: l.Name, First: stats.Summarize(firsts[i]), Next: stats.Summarize(nexts[i])}
		for _, w := range warm {
			if w.Lang.Name == l.Name {
				rows[i].WarmP50 = w.Wasm.P50
			}
		}
	}
	return rows, b.terminate(id)
}

// coldFirst times, o.cold times per pair in a random order each round, a fresh sandbox's create
// and first exec; each sandbox ends before the next is made.
func (b *bench) coldFirst(warm []warmRow) ([]coldRow, error) {
	ps := b.pairs()
	creates := make([][]time.Duration, len(ps))
	firsts := make([][]time.Duration, len(ps))
	for range b.o.cold {
		if interrupted.Load() {
			return nil, errors.New("interrupted")
		}
		for _, i := range rand.Perm(len(ps)) {
			id, c, err := b.create(ps[i].level)
			if err != nil {
				return nil, err
			}
			d, err := b.exec(id, ps[i].lang)
			if err != nil {
				return nil, err
			}
			if err := b.terminate(id); err != nil {
				return nil, err
			}
			creates[i], firsts[i] = append(creates[i], c), append(firsts[i], d)
		}
	}
	var rows []coldRow
	for i, p := range ps {
		r := coldRow{Level: p.level, Lang: p.lang.Name, Create: stats.Summarize(creates[i]), First: stats.Summarize(firsts[i])}
		for _, w := range warm {
			if w.Lang.Name == p.lang.Name {
				r.WarmP50 = map[bool]float64{true: w.Wasm.P50, false: w.Process.P50}[p.level == api.LevelWasm]
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// cleanup terminates every sandbox still live, a few at a time.
func (b *bench) cleanup() error {
	b.mu.Lock()
	ids := slices.Clone(b.ids)
	b.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	progress("terminating %d sandboxes", len(ids))
	work := make(chan string)
	errc := make(chan error, len(ids))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for id := range work {
				errc <- b.terminate(id)
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	close(errc)
	var errs []string
	for err := range errc {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
