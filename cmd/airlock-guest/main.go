// Command airlock-guest is what a microvm guest runs: its PID 1 (the guest agent, the
// initramfs's /init) and, re-executed, its sandbox's init. It is airlock's two guest roles and
// nothing of the daemon, so that the Go runtime initialises a few packages at each start rather
// than all of airlock's (about 0.8 s per boot under QEMU's software CPU). `make build` puts it
// beside airlock, which uses it when both are of one build (internal/driver/microvm/guestbin.go);
// it is not a command to run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/guest/pid1"
	"github.com/airlockrun/airlock/internal/guest/vm"
)

func main() {
	if vm.IsAgent() {
		vm.Run()
	}
	if pid1.IsInit() {
		pid1.Run()
	}
	if len(os.Args) == 2 && os.Args[1] == guest.BuildArg {
		fmt.Println(guest.Build)
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "airlock-guest is the PID 1 of airlock's microvm guests, not a command (see airlock run --isolation microvm)")
	os.Exit(2)
}
