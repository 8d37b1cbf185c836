package process

import (
	"os"
	"strconv"
	"strings"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/landlock"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// probe inspects the host once: what airlock's init needs of it (the runtime's checks), and what
// the level adds. Required checks decide availability; the others weaken the level and `airlock
// doctor` says so.
func (d *Driver) probe() driver.Capabilities {
	c := driver.Capabilities{Level: sandbox.LevelProcess}
	check := func(name string, required, ok bool, detail string) {
		c.Checks = append(c.Checks, driver.Check{Name: name, OK: ok, Detail: detail, Required: required})
	}
	rc := d.rt.Checks()
	c.Checks = append(c.Checks, rc.Root, rc.Kernel, rc.UserNamespaces)

	layout, err := cgroups.Detect()
	switch {
	case err != nil:
		check("cgroups", true, false, err.Error())
	case len(layout.Missing()) > 0:
		check("cgroups", true, false, layout.Describe()+"; missing: "+strings.Join(layout.Missing(), ", "))
	default:
		d.cgroups = layout
		check("cgroups", true, true, layout.Describe())
	}

	if layout != nil && layout.Mode() != "v2" {
		// Moving a process into a v1 cgroup takes a lock that waits for an RCU grace period
		// (~8 ms on an idle VM); every sandbox start pays it once unless grace periods are expedited.
		exp, _ := os.ReadFile("/sys/kernel/rcu_expedited")
		fast := strings.TrimSpace(string(exp)) == "1"
		check("start latency", false, fast, map[bool]string{
			true:  "rcu_expedited=1: cgroup v1 moves do not wait for a full RCU grace period",
			false: "cgroup v1: each sandbox start waits ~1 RCU grace period to enter its cgroup (fix: echo 1 > /sys/kernel/rcu_expedited, or boot with cgroup v2)",
		}[fast])
	}
	c.Checks = append(c.Checks, rc.Seccomp)

	abi, err := landlock.ABI()
	d.landlockABI = abi
	if err != nil {
		check("landlock", false, false, err.Error()+" (mount and seccomp rules still hold; enable with lsm=landlock,...)")
	} else {
		check("landlock", false, true, "ABI "+strconv.Itoa(abi))
	}

	fs, _ := os.ReadFile("/proc/filesystems")
	check("overlayfs", false, strings.Contains(string(fs), "\toverlay\n"), "needed for --rootfs DIR (copy-on-write root)")
	c.Checks = append(c.Checks, rc.HostTemplate, rc.UIDRanges)

	var missing []string
	for _, ch := range c.Checks {
		if ch.Required && !ch.OK {
			missing = append(missing, ch.Name+": "+ch.Detail)
		}
	}
	c.Available = len(missing) == 0
	if !c.Available {
		c.Reason = strings.Join(missing, "; ")
		c.Fix = "run airlock as root on Linux 5.10+ with user namespaces and the cpu, memory and pids cgroup controllers"
	}
	c.Features = []string{"namespaces:user,pid,mount,net,uts,ipc,cgroup", "seccomp:allowlist", "capabilities:none", "no_new_privs",
		"limits:cpu,memory,pids,nofile,disk,timeout", "network:none",
		// Files only: saving processes that run on the host's kernel would take CRIU.
		driver.FeatureSnapshotFilesystem}
	if abi > 0 {
		c.Features = append(c.Features, "landlock:abi"+strconv.Itoa(abi))
	}
	if layout != nil {
		c.Features = append(c.Features, "cgroups:"+layout.Mode())
	}
	return c
}
