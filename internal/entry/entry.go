// Package entry is where every airlock binary begins (cmd/airlock, cmd/airlock-kube, the
// benchmarks that start sandboxes in process): the binary is also every sandbox's init, every
// microvm guest's PID 1 and every VMM's jail, and every wasm sandbox's worker, and which of them
// this process is shows in how it was started, before any command line is read.
package entry

import (
	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/driver/wasm"
	"github.com/airlockrun/airlock/internal/guest/pid1"
	"github.com/airlockrun/airlock/internal/guest/vm"
)

// Roles runs the role this process was started for, never returning, or returns when it was
// started as itself (a command). Call it first in main: a sandbox's init path must stay cheap.
func Roles() {
	if pid1.IsInit() {
		pid1.Run()
	}
	// Every microvm guest's PID 1 (the initramfs's /init), and every VMM's jail.
	if vm.IsAgent() {
		vm.Run()
	}
	if microvm.IsJail() {
		microvm.Jail()
	}
	// Every wasm sandbox's worker, started inside its jail.
	if wasm.IsWorker() {
		wasm.Worker()
	}
}
