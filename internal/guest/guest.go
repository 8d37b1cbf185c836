// Package guest is the contract between the two sides of airlock's init, the PID 1 of every
// sandbox whatever its level: the control protocol (its messages, their framing, the setup
// plan the host sends), and the few facts both sides must agree on (how init is started, its
// uid, the layout of the writable layer). Both sides import it; it runs nowhere by itself.
//
// The sandbox side, init itself, is internal/guest/pid1: the airlock binary re-executed inside
// the sandbox (cmd/airlock checks pid1.IsInit first thing). The host side, which starts init and
// drives it over the control socket, is internal/guest/host; every level that runs init — the
// process level, which starts it in namespaces it makes, and the container level, whose runtime
// starts it — goes through it.
package guest

import (
	"time"

	"github.com/airlockrun/airlock/internal/snapshot"
)

// Arg0 is the argv[0] under which the airlock binary (or a test binary) runs as a sandbox's init:
// the host starts it so, and pid1.IsInit recognises it.
const Arg0 = "airlock-init"

// Build tells binaries of one build apart from others: make build sets it (-ldflags -X) to one
// value per run in every binary it makes. A host and a guest of one build speak one protocol,
// which no version negotiates, so airlock runs a separate guest binary only of its own build
// (internal/driver/microvm/guestbin.go). Empty in a binary built otherwise.
var Build string

// BuildArg is the argument on which a guest binary prints its Build and exits.
const BuildArg = "build-id"

// ControlFd is where init finds its end of the control socket (ExtraFiles[0]); ListenFd is where
// an adoptable sandbox's init finds the socket a restarted host connects to (ExtraFiles[1],
// Config.OrphanGraceMs).
const (
	ControlFd = 3
	ListenFd  = 4
)

// ControlEnv names the variable of init's environment that holds the path, in the sandbox, of the
// control socket to dial instead of inheriting ControlFd (a sandbox whose kernel is saved and
// restored: gVisor's).
const ControlEnv = "AIRLOCK_CONTROL"

// InitUID is the uid and gid of a locked-down init inside every sandbox, one no command ever runs
// as: a level that gives init a control socket to dial makes it reachable by this uid alone.
const InitUID = 65533

// Hostname is every sandbox's host name; /etc/hosts resolves it, so it is the same for all and
// the generated /etc can be shared.
const Hostname = "sandbox"

// InitTasks is what init itself may use of a sandbox's pids limit: the Go runtime's threads. The
// limit the kernel enforces is maxProcesses plus this, so that the agent gets what it asked for.
const InitTasks = 8

// LayerLayout is what of a writable layer init built a snapshot holds: the root's skeleton and
// writable directories (host template), an overlay's upper directory (image, rootfs) and
// /dev/shm. oldroot, work and the lower layers' mount points are setup's own.
var LayerLayout = snapshot.Layout{
	Top: []string{"newroot", "upper", "shm"},
	At:  map[string]string{"newroot": "/", "upper": "/", "shm": "/dev/shm"},
}

// RedialWindow is how long init keeps dialling after its control socket broke before it gives
// up, and the sandbox ends (a host that is gone for good does not come back), and so how long the
// host waits for it to come back.
const RedialWindow = 10 * time.Second
