package cli

import (
	"fmt"
	"runtime"
)

// Version is set at build time (-ldflags "-X .../internal/cli.Version=...").
var Version = "dev"

func versionCmd(e *env, args []string) int {
	fmt.Fprintf(e.stdout, "airlock %s (%s, %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
