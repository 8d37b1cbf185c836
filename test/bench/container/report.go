package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/test/bench/stats"
)

type report struct {
	Host    hostFacts    `json:"host"`
	Rounds  int          `json:"rounds"`
	Warmup  int          `json:"warmup"`
	Startup []startupRow `json:"startup"`
	// RawDeletes is how many raw runs needed a `delete --force` afterwards (0: run cleaned up).
	RawDeletes int64        `json:"raw_deletes"`
	Image      *imageReport `json:"image"`
	Restore    *restoreRow  `json:"restore"`
}

type startupRow struct {
	Workload string        `json:"workload"`
	Argv     []string      `json:"argv"`
	Runtime  string        `json:"runtime"`
	Airlock  stats.Summary `json:"airlock"`
	Raw      stats.Summary `json:"raw"`
	Ratio    float64       `json:"ratio_p50"`
	// Pool is the daemon with a warm pool: claim, exec, terminate.
	Pool      stats.Summary `json:"pool"`
	PoolRatio float64       `json:"pool_ratio_p50"`
	AirlockMS []float64     `json:"airlock_samples_ms"` // in run order
	RawMS     []float64     `json:"raw_samples_ms"`
	PoolMS    []float64     `json:"pool_samples_ms"`
}

type imageReport struct {
	Ref  string     `json:"ref"`
	Rows []imageRow `json:"levels"`
}

type imageRow struct {
	Level   string        `json:"level"`
	Pull    stats.Summary `json:"pull"`
	First   stats.Summary `json:"first"`
	Later   stats.Summary `json:"later"`
	Ratio   float64       `json:"ratio_first_later_p50"`
	FirstMS []float64     `json:"first_samples_ms"`
	LaterMS []float64     `json:"later_samples_ms"`
}

type hostFacts struct {
	Kernel  string `json:"kernel"`
	Cgroup  string `json:"cgroup"`
	NProc   int    `json:"nproc"`
	Airlock string `json:"airlock"`
	Runsc   string `json:"runsc"`
	Runc    string `json:"runc"`
}

func facts(airlock string) hostFacts {
	first := func(argv ...string) string {
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	cg := "v1"
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		cg = "v2"
	}
	return hostFacts{Kernel: strings.TrimSpace(string(kernel)), Cgroup: cg, NProc: runtime.NumCPU(),
		Airlock: first(airlock, "version"), Runsc: runscPath + " " + first(runscPath, "--version"), Runc: runcPath + " " + first(runcPath, "--version")}
}

func verdict(ratio, target float64) string {
	if ratio != ratio { // NaN
		return "n/a"
	}
	if ratio <= target {
		return "MET"
	}
	return "NOT MET"
}

func (r *report) print(out io.Writer) {
	h := r.Host
	fmt.Fprintf(out, "host: kernel %s, cgroup %s, %d cpus\n", h.Kernel, h.Cgroup, h.NProc)
	fmt.Fprintf(out, "airlock %s; runsc %s; runc %s\n", h.Airlock, h.Runsc, h.Runc)
	fmt.Fprintln(out, "\nrunners:")
	fmt.Fprintln(out, "  airlock  airlock run --isolation container --runtime R -- W: assemble root, spec, R run --detach of")
	fmt.Fprintln(out, "           airlock's init, exec W through init, R delete, unmount (one-shot, as a user runs it)")
	fmt.Fprintln(out, "  raw      R run --bundle B (foreground) of a bundle prepared once whose process is W, same namespaces,")
	fmt.Fprintln(out, "           id mapping, cgroup limits, rlimit, masked paths; runsc with airlock's global flags")
	fmt.Fprintln(out, "           (--platform systrap --network none --overlay2 none --host-uds open); R delete if state is left")
	fmt.Fprintln(out, "  pool     airlock serve with a warm pool per runtime: create (claims a ready sandbox), exec W, terminate,")
	fmt.Fprintln(out, "           over the Go SDK; the pools are refilled before every timed run of any runner")
	fmt.Fprintf(out, "\nstartup: %d measured rounds after %d warm-up, interleaved in random order; times in ms; target airlock/raw p50 <= %.1f\n",
		r.Rounds, r.Warmup, targetStartup)
	fmt.Fprintf(out, "%-8s %-8s %9s %9s %9s %9s %7s %-8s %7s %7s %7s  %s\n", "workload", "runtime", "airlock50", "airlock90",
		"raw50", "raw90", "ratio", "verdict", "pool50", "pool90", "ratio", "verdict")
	for _, s := range r.Startup {
		fmt.Fprintf(out, "%-8s %-8s %9.1f %9.1f %9.1f %9.1f %7.2f %-8s %7.1f %7.1f %7.2f  %s\n", s.Workload, s.Runtime,
			s.Airlock.P50, s.Airlock.P90, s.Raw.P50, s.Raw.P90, s.Ratio, verdict(s.Ratio, targetStartup),
			s.Pool.P50, s.Pool.P90, s.PoolRatio, verdict(s.PoolRatio, targetStartup))
	}
	fmt.Fprintf(out, "raw runs that left runtime state and needed delete --force (timed): %d\n", r.RawDeletes)
	if x := r.Restore; x != nil {
		fmt.Fprintln(out, "\nrestore with memory (runsc), a shell counting in the background; interleaved; times in ms:")
		fmt.Fprintln(out, "  airlock  POST .../restore through the daemon of a snapshot with memory, as configured by default: the snapshot's")
		fmt.Fprintln(out, "           layer extracted into the container made ahead for the restore (runsc create), runsc restore into it,")
		fmt.Fprintf(out, "           init dials back, swap, store; snapshot %.2f MiB\n", x.ImageMB)
		fmt.Fprintln(out, "  cold     the same through a daemon with container.prepareRestores false: a new bundle over the snapshot's")
		fmt.Fprintln(out, "           layer, and runsc restore making its container")
		fmt.Fprintln(out, "  raw      runsc restore --detach of a checkpoint (--compression none) of the raw bundle running the counter")
		fmt.Fprintf(out, "%9s %9s %9s %9s %9s %9s %7s  %-8s %7s\n", "airlock50", "airlock90", "cold50", "cold90", "raw50", "raw90", "ratio", "verdict", "cold")
		fmt.Fprintf(out, "%9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %7.2f  %-8s %7.2f   (target airlock/raw <= %.1f)\n", x.Airlock.P50, x.Airlock.P90,
			x.Cold.P50, x.Cold.P90, x.Raw.P50, x.Raw.P90, x.Ratio, verdict(x.Ratio, targetRestore), x.ColdRatio, targetRestore)
	}
	if r.Image == nil {
		return
	}
	fmt.Fprintf(out, "\nimage %s, `airlock run --image REF -- /bin/true`: per round and level, interleaved, the image's\n", r.Image.Ref)
	fmt.Fprintln(out, "first sandbox (fresh data dir warmed by one host-root sandbox, then pull, then the first sandbox) and a")
	fmt.Fprintf(out, "later one (data dir that pulled it once); %d measured rounds; target first/later p50 <= %.1f\n", r.Rounds, targetImage)
	fmt.Fprintf(out, "%-16s %7s %8s %8s %8s %8s %7s  %s\n", "level", "pull50", "first50", "first90", "later50", "later90", "ratio", "verdict")
	for _, x := range r.Image.Rows {
		fmt.Fprintf(out, "%-16s %7.1f %8.1f %8.1f %8.1f %8.1f %7.2f  %s\n", x.Level, x.Pull.P50,
			x.First.P50, x.First.P90, x.Later.P50, x.Later.P90, x.Ratio, verdict(x.Ratio, targetImage))
	}
}
