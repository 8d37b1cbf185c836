// Command airlock runs code an AI agent wrote in a sandbox it cannot escape. See README.md.
package main

import (
	"os"

	"github.com/airlockrun/airlock/internal/cli"
	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/driver/wasm"
	"github.com/airlockrun/airlock/internal/guest/pid1"
	"github.com/airlockrun/airlock/internal/guest/vm"
)

func main() {
	// The same binary is every sandbox's init; that path must stay first and cheap.
	if pid1.IsInit() {
		pid1.Run()
	}
	// And every microvm guest's PID 1 (the initramfs's /init), and every VMM's jail.
	if vm.IsAgent() {
		vm.Run()
	}
	if microvm.IsJail() {
		microvm.Jail()
	}
	// And every wasm sandbox's worker, started inside its jail.
	if wasm.IsWorker() {
		wasm.Worker()
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
