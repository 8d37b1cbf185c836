package process

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/cgroups"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/hosttemplate"
	"github.com/airlockrun/airlock/internal/landlock"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/seccomp"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// probe inspects the host once. Required checks decide availability; the others weaken the
// level and `airlock doctor` says so.
func (d *Driver) probe() driver.Capabilities {
	c := driver.Capabilities{Level: sandbox.LevelProcess}
	check := func(name string, required, ok bool, detail string) {
		c.Checks = append(c.Checks, driver.Check{Name: name, OK: ok, Detail: detail, Required: required})
	}

	root := os.Geteuid() == 0
	check("root", true, root, map[bool]string{true: "running as root",
		false: "airlock creates cgroups and maps a host uid range for each sandbox: run it as root"}[root])

	var u unix.Utsname
	unix.Uname(&u)
	rel := unix.ByteSliceToString(u.Release[:])
	check("kernel", true, kernelAtLeast(rel, 5, 10), "Linux "+rel+" (needs 5.10 or later)")

	n, _ := os.ReadFile("/proc/sys/user/max_user_namespaces")
	userns := strings.TrimSpace(string(n))
	check("user namespaces", true, userns != "" && userns != "0",
		"user.max_user_namespaces = "+userns+map[bool]string{true: "", false: " (fix: sysctl -w user.max_user_namespaces=15000)"}[userns != "" && userns != "0"])

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
	status, _ := os.ReadFile("/proc/self/status")
	check("seccomp", true, strings.Contains(string(status), "Seccomp_filters:") || strings.Contains(string(status), "Seccomp:"),
		"seccomp-bpf filters ("+strconv.Itoa(len(seccomp.Blocked()))+" calls answered EPERM, unknown calls ENOSYS)")

	abi, err := landlock.ABI()
	d.landlockABI = abi
	if err != nil {
		check("landlock", false, false, err.Error()+" (mount and seccomp rules still hold; enable with lsm=landlock,...)")
	} else {
		check("landlock", false, true, "ABI "+strconv.Itoa(abi))
	}

	fs, _ := os.ReadFile("/proc/filesystems")
	check("overlayfs", false, strings.Contains(string(fs), "\toverlay\n"), "needed for --rootfs DIR (copy-on-write root)")

	host, err := hosttemplate.Probe(d.cfg.HostPaths, d.cfg.StateDir)
	d.host = host
	detail := host.Summary()
	if err != nil {
		detail = err.Error()
	}
	check("host template", true, err == nil && host.Usable(), detail)

	if d.uidsErr != nil {
		check("uid ranges", true, false, d.uidsErr.Error())
	} else {
		check("uid ranges", true, true, fmt.Sprintf("a host range of %d uids per sandbox, records in %s, instance %s", uidalloc.Size, d.uids.Dir(), d.instance))
	}

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

func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, _ := strconv.Atoi(parts[0])
	mi, _ := strconv.Atoi(strings.TrimLeftFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return ma > major || ma == major && mi >= minor
}
