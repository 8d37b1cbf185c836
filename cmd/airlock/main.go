// Command airlock runs code an AI agent wrote in a sandbox it cannot escape. See README.md.
package main

import (
	"os"

	"github.com/airlockrun/airlock/internal/cli"
	"github.com/airlockrun/airlock/internal/entry"
)

func main() {
	// The same binary is every sandbox's init, guest agent, VMM jail and wasm worker.
	entry.Roles()
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
