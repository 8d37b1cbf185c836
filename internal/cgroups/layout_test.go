package cgroups

import (
	"io/fs"
	"reflect"
	"strings"
	"testing"
)

// Mountinfo fixtures, trimmed to the interesting lines plus some noise.
const (
	noise = `22 29 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
23 29 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
29 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
`
	// Fedora / Ubuntu 22.04+: cgroup2 only.
	mountinfoV2 = noise + `35 23 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	// CentOS 7 style: v1 only, cpu and cpuacct co-mounted.
	mountinfoV1 = noise + `25 23 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:8 - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd
28 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,cpuacct,cpu
29 25 0:27 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,memory
30 25 0:28 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,pids
31 25 0:29 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,freezer
32 25 0:30 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpuset
`
	// systemd "hybrid" (Ubuntu 20.04, Debian 10): v1 controllers plus an
	// empty cgroup2 at /sys/fs/cgroup/unified.
	mountinfoHybrid = noise + `25 23 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:8 - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:25 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,xattr,name=systemd
28 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,cpu,cpuacct
29 25 0:27 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,memory
30 25 0:28 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,pids
31 25 0:29 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,freezer
`
	// This development VM: every v1 controller separate, cgroup2 unified empty.
	mountinfoSeparate = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	// A hybrid host where memory and pids were left to cgroup2, and a
	// mount point with an escaped space.
	mountinfoMixed = `26 25 0:24 / /sys/fs/cgroup/uni\040fied rw - cgroup2 cgroup2 rw
28 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
31 25 0:29 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer
`
)

// fakeFS serves readFile from a map, reporting fs.ErrNotExist otherwise.
func fakeFS(files map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
}

func TestParseLayout(t *testing.T) {
	const all = "cpu,cpuacct,memory,pids,freezer"
	tests := []struct {
		name      string
		mountinfo string
		files     map[string]string
		mode      string
		missing   []string
		v1, v2    string // comma-separated controllers expected on each
		paths     []string
		describe  string
	}{{
		name:      "pure v2",
		mountinfo: mountinfoV2,
		files: map[string]string{
			"/sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n",
			"/proc/sys/kernel/osrelease":        "6.8.0-45-generic\n",
		},
		mode: "v2", v2: all,
		paths:    []string{"/sys/fs/cgroup/airlock/sb"},
		describe: "v2 (cpu,cpuacct,memory,pids,freezer via v2 at /sys/fs/cgroup)",
	}, {
		name:      "v2 before cgroup.freeze and without pids",
		mountinfo: mountinfoV2,
		files: map[string]string{
			"/sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
			"/proc/sys/kernel/osrelease":        "5.1.0\n",
		},
		mode: "v2", v2: "cpu,cpuacct,memory", missing: []string{"pids", "cgroup.freeze"},
		paths:    []string{"/sys/fs/cgroup/airlock/sb"},
		describe: "v2 (cpu,cpuacct,memory via v2 at /sys/fs/cgroup; no cgroup.kill; missing pids,cgroup.freeze)",
	}, {
		name:      "pure v1, cpu and cpuacct co-mounted",
		mountinfo: mountinfoV1,
		mode:      "v1", v1: all,
		paths: []string{
			"/sys/fs/cgroup/cpu,cpuacct/airlock/sb",
			"/sys/fs/cgroup/memory/airlock/sb",
			"/sys/fs/cgroup/pids/airlock/sb",
			"/sys/fs/cgroup/freezer/airlock/sb",
		},
		describe: "v1 (cpu,cpuacct,memory,pids,freezer via v1)",
	}, {
		name:      "systemd hybrid",
		mountinfo: mountinfoHybrid,
		files:     map[string]string{"/sys/fs/cgroup/unified/cgroup.controllers": "\n"},
		mode:      "hybrid", v1: all,
		paths: []string{
			"/sys/fs/cgroup/cpu,cpuacct/airlock/sb",
			"/sys/fs/cgroup/memory/airlock/sb",
			"/sys/fs/cgroup/pids/airlock/sb",
			"/sys/fs/cgroup/freezer/airlock/sb",
		},
		describe: "hybrid (cpu,cpuacct,memory,pids,freezer via v1; unified mounted at /sys/fs/cgroup/unified, no controllers)",
	}, {
		name:      "separate cpu and cpuacct (this VM)",
		mountinfo: mountinfoSeparate,
		files:     map[string]string{"/sys/fs/cgroup/unified/cgroup.controllers": ""},
		mode:      "hybrid", v1: all,
		paths: []string{
			"/sys/fs/cgroup/cpu/airlock/sb",
			"/sys/fs/cgroup/cpuacct/airlock/sb",
			"/sys/fs/cgroup/memory/airlock/sb",
			"/sys/fs/cgroup/pids/airlock/sb",
			"/sys/fs/cgroup/freezer/airlock/sb",
		},
		describe: "hybrid (cpu,cpuacct,memory,pids,freezer via v1; unified mounted at /sys/fs/cgroup/unified, no controllers)",
	}, {
		name:      "mixed: memory and pids on v2",
		mountinfo: mountinfoMixed,
		files: map[string]string{
			"/sys/fs/cgroup/uni fied/cgroup.controllers": "memory pids io\n",
			"/proc/sys/kernel/osrelease":                 "5.15.0\n",
		},
		mode: "hybrid", v1: "cpu,cpuacct,freezer", v2: "memory,pids",
		paths: []string{
			"/sys/fs/cgroup/cpu,cpuacct/airlock/sb",
			"/sys/fs/cgroup/uni fied/airlock/sb",
			"/sys/fs/cgroup/freezer/airlock/sb",
		},
		describe: "hybrid (cpu,cpuacct,freezer via v1; memory,pids via v2 at /sys/fs/cgroup/uni fied)",
	}, {
		name:      "no cgroups",
		mountinfo: noise,
		mode:      "none", missing: []string{"cpu", "memory", "pids", "freezer"},
		describe: "none (missing cpu,memory,pids,freezer)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := parseLayout(tt.mountinfo, fakeFS(tt.files))
			if err != nil {
				t.Fatal(err)
			}
			if got := l.Mode(); got != tt.mode {
				t.Errorf("Mode() = %q, want %q", got, tt.mode)
			}
			if got := l.Missing(); !reflect.DeepEqual(got, tt.missing) {
				t.Errorf("Missing() = %q, want %q", got, tt.missing)
			}
			v1, v2 := l.split()
			if got := strings.Join(v1, ","); got != tt.v1 {
				t.Errorf("on v1: %q, want %q", got, tt.v1)
			}
			if got := strings.Join(v2, ","); got != tt.v2 {
				t.Errorf("on v2: %q, want %q", got, tt.v2)
			}
			if got := l.Describe(); got != tt.describe {
				t.Errorf("Describe() =\n  %q\nwant\n  %q", got, tt.describe)
			}
			c := l.Open("airlock", "sb")
			if tt.paths == nil {
				if c.err == nil {
					t.Errorf("Open on a host without cgroups: want an error")
				}
				return
			}
			if got := c.Paths(); !reflect.DeepEqual(got, tt.paths) {
				t.Errorf("Paths() = %q, want %q", got, tt.paths)
			}
		})
	}
}

func TestOpenRejectsBadNames(t *testing.T) {
	l, err := parseLayout(mountinfoV1, fakeFS(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ parent, name string }{
		{"airlock", ""}, {"airlock", ".."}, {"airlock", "a/b"}, {"../x", "sb"},
		{"/abs", "sb"}, {"a//b", "sb"}, {"airlock", ".hidden"}, {"airlock", "sp ace"},
	} {
		c := l.Open(tt.parent, tt.name)
		if c.err == nil {
			t.Errorf("Open(%q, %q): want an error", tt.parent, tt.name)
		}
		if err := c.Destroy(t.Context()); err == nil {
			t.Errorf("Open(%q, %q).Destroy: want an error", tt.parent, tt.name)
		}
	}
	for _, tt := range []struct{ parent, name string }{
		{"", "sb"}, {"airlock", "sb-1_x.y"}, {"airlock/nested", "sb"},
	} {
		if c := l.Open(tt.parent, tt.name); c.err != nil {
			t.Errorf("Open(%q, %q): %v", tt.parent, tt.name, c.err)
		}
	}
}

func TestKeyedAndVersion(t *testing.T) {
	data := []byte("usage_usec 1500\nnr_throttled 7\nthrottled_usec 42\n")
	for _, tt := range []struct {
		key  string
		want int64
		ok   bool
	}{{"usage_usec", 1500, true}, {"nr_throttled", 7, true}, {"throttled_usec", 42, true}, {"throttled", 0, false}, {"nr", 0, false}} {
		if v, ok := keyed(data, tt.key); v != tt.want || ok != tt.ok {
			t.Errorf("keyed(%q) = %d, %v; want %d, %v", tt.key, v, ok, tt.want, tt.ok)
		}
	}
	for _, tt := range []struct {
		rel      string
		maj, min int
		ok       bool
	}{{"6.18.44-fc-v657\n", 6, 18, true}, {"5.14.0-362.el9.x86_64", 5, 14, true}, {"4.19", 4, 19, true}, {"junk", 0, 0, false}} {
		maj, min, ok := kernelVersion([]byte(tt.rel))
		if maj != tt.maj || min != tt.min || ok != tt.ok {
			t.Errorf("kernelVersion(%q) = %d.%d %v", tt.rel, maj, min, ok)
		}
	}
}
