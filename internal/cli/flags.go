package cli

import (
	"errors"
	"flag"
	"fmt"
	"github.com/airlockrun/airlock/internal/sandbox"
	"strconv"
	"strings"
	"time"
)

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// mibFlag parses a size like 512M, 1G, 1.5g, 256MiB or a bare number of MiB into MiB.
type mibFlag struct{ mib *int64 }

func (f mibFlag) String() string {
	if f.mib == nil || *f.mib == 0 {
		return ""
	}
	return strconv.FormatInt(*f.mib, 10) + "M"
}

func (f mibFlag) Set(v string) error {
	n, err := parseMiB(v)
	if err != nil {
		return err
	}
	*f.mib = n
	return nil
}

func parseMiB(v string) (int64, error) { return sandbox.ParseMiB(v) }

// durationFlag takes a Go duration (30s, 2m) or a number of seconds.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(v string) error {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		*f.d = time.Duration(n * float64(time.Second))
	} else if d, err := time.ParseDuration(v); err == nil {
		*f.d = d
	} else {
		return fmt.Errorf("%q is not a duration (examples: 30s, 5m, 90)", v)
	}
	if *f.d <= 0 {
		return errors.New("must be positive")
	}
	return nil
}

// flagForField names the CLI flag behind a spec field, so validation errors speak the user's
// language.
var flagForField = map[string]string{
	"resources.cpu": "--cpu", "resources.memoryMb": "--memory", "resources.diskMb": "--disk",
	"resources.maxProcesses": "--pids", "resources.maxOpenFiles": "--nofile",
	"timeout.maxDurationSeconds": "--timeout", "network.egressPolicy": "--network",
	"isolation": "--isolation", "user": "--user", "workdir": "--workdir", "environment": "--env",
	"rootfs": "--rootfs", "image": "--image",
}

// explicitZero reports a flag given as 0 (or less) where 0 would mean "the default": a user who
// writes --cpu 0 asked for something, and gets the range error instead of the default.
func explicitZero(fs *flag.FlagSet) error {
	explicit := map[string]sandbox.Limit{"cpu": sandbox.Limits.CPU, "pids": sandbox.Limits.MaxProcesses, "nofile": sandbox.Limits.MaxOpenFiles}
	var zeroErr error
	fs.Visit(func(f *flag.Flag) {
		if l, ok := explicit[f.Name]; ok && zeroErr == nil {
			if v, err := strconv.ParseFloat(f.Value.String(), 64); err == nil && v <= 0 {
				zeroErr = l.Check(v)
			}
		}
	})
	return zeroErr
}
