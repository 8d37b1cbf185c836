package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// ModuleRoot walks up from the working directory to the directory holding go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// BuildCommands builds the module's commands (cmd/NAME) into dir as make build does: static, and
// marked as of one build, so that airlock takes airlock-guest beside it for its microvm guests
// (internal/driver/microvm/guestbin.go).
func BuildCommands(dir string, names ...string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	ldflags := "-X github.com/airlockrun/airlock/internal/guest.Build=test-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	for _, name := range names {
		cmd := exec.Command("go", "build", "-ldflags", ldflags, "-o", filepath.Join(dir, name), "./cmd/"+name)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/%s: %w\n%s", name, err, out)
		}
	}
	return nil
}
