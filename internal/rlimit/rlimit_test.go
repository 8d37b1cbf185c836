package rlimit

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
)

func TestEnsureNoFile(t *testing.T) {
	var before unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	// What this process has already needs no change.
	if err := EnsureNoFile(before.Max); err != nil {
		t.Fatalf("the current hard limit: %v", err)
	}
	// Past the host's ceiling no process can go: a clear refusal naming the field.
	ceiling, err := nrOpen()
	if err != nil {
		t.Skipf("no %s: %v", nrOpenPath, err)
	}
	err = EnsureNoFile(ceiling + 1)
	fe, ok := errors.AsType[*errdefs.FieldError](err)
	if !ok || fe.Field != "resources.maxOpenFiles" || !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "fs.nr_open") {
		t.Fatalf("past fs.nr_open: %v", err)
	}
	var after unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("a refusal changed the limit: %+v, was %+v", after, before)
	}
}
