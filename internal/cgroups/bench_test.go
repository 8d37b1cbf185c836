package cgroups

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
)

// BenchmarkLifecycle measures the per-sandbox cgroup work on an empty
// cgroup: creation, limits, joining, one Stats read and removal.
func BenchmarkLifecycle(b *testing.B) {
	l := hostLayout(b)
	r := Resources{CPU: 1, MemoryBytes: 256 << 20, Pids: 128}
	ctx := context.Background()

	b.Run("New+Set+Destroy", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			c, err := l.New(testParent(), fmt.Sprintf("bench-a%d", i))
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Set(r); err != nil {
				b.Fatal(err)
			}
			if err := c.Destroy(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("New+Set+AddProc+Stats+Destroy", func(b *testing.B) {
		// One helper process hops from each iteration's cgroup into the
		// next, so every iteration joins a process and then destroys an
		// empty cgroup, without fork/exec in the measured loop.
		cmd := exec.Command("sleep", "1000")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		var prev *Cgroup
		for i := 0; b.Loop(); i++ {
			c, err := l.New(testParent(), fmt.Sprintf("bench-b%d", i))
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Set(r); err != nil {
				b.Fatal(err)
			}
			if err := c.AddProc(cmd.Process.Pid); err != nil {
				b.Fatal(err)
			}
			if _, err := c.Stats(); err != nil {
				b.Fatal(err)
			}
			if prev != nil {
				if err := prev.Destroy(ctx); err != nil {
					b.Fatal(err)
				}
			}
			prev = c
		}
		b.StopTimer()
		// The last cgroup still holds the helper: Destroy kills it.
		if err := prev.Destroy(ctx); err != nil {
			b.Error(err)
		}
		_ = cmd.Wait()
	})
}

// BenchmarkStats measures one Stats read of a live cgroup.
func BenchmarkStats(b *testing.B) {
	l := hostLayout(b)
	c, err := l.New(testParent(), "bench-stats")
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := c.Destroy(context.Background()); err != nil {
			b.Error(err)
		}
	}()
	for b.Loop() {
		if _, err := c.Stats(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddProc measures moving one process between two cgroups.
func BenchmarkAddProc(b *testing.B) {
	l := hostLayout(b)
	var cg [2]*Cgroup
	for i := range cg {
		c, err := l.New(testParent(), fmt.Sprintf("bench-move%d", i))
		if err != nil {
			b.Fatal(err)
		}
		cg[i] = c
	}
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		if err := cg[i%2].AddProc(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for _, c := range cg {
		if err := c.Destroy(context.Background()); err != nil {
			b.Error(err)
		}
	}
	_ = cmd.Wait()
}
