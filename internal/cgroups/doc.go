// Package cgroups places airlock sandboxes in Linux control groups: it finds
// where the cpu, cpuacct, memory, pids and freezer controllers live on the
// host (cgroup v1 hierarchies, the v2 unified hierarchy, or a mix of both),
// creates one cgroup per sandbox in every hierarchy involved, applies CPU,
// memory and pid limits, reports usage, and kills and removes the cgroup
// without letting forked or double-forked processes escape.
//
// Nothing is assumed about the host: Detect reads /proc/self/mountinfo once
// and the resulting Layout is reused for every sandbox, so the per-sandbox
// path (New, Set, AddProc, Stats, Destroy) only touches the cgroup's own
// control files.
//
// Support levels: cgroup v1 (controllers in separate or co-mounted
// hierarchies), pure cgroup v2, and hybrid hosts where the unified hierarchy
// is mounted beside v1 ones; each controller is used wherever the host put
// it. Everything needs root (or an equivalent delegation).
package cgroups
