// Package pid1 is airlock's init: the PID 1 of every sandbox, whatever its level. It runs inside
// the sandbox — never in the airlock process that serves the API — as the airlock binary
// re-executed under the name guest.Arg0 (cmd/airlock, and the TestMain of every test that starts
// sandboxes, call Run first thing when IsInit says so).
//
// The host side (internal/guest/host) starts it and talks to it over the control socket
// (internal/guest has the protocol). When the process level started it, in fresh namespaces, init
// builds the sandbox's root filesystem from the host's plan (mounts.go); when a container runtime
// did, the root is in place already. Either way it then sets its limits, locks itself down
// (init.go: Landlock, no_new_privs, its own uid, seccomp) and starts, signals and reaps the
// commands the host sends, on one locked OS thread. Under gVisor it also keeps a pids cgroup of the
// sandbox's own kernel (cgroup.go), relays terminals (relay.go) and redials its control socket
// after a memory snapshot (redial.go).
package pid1
