package fsdiff

import (
	"fmt"
	"os"
	"testing"
)

// BenchmarkScan scans a layer of n files (100 to a directory) on tmpfs, as the levels' layers
// are (on the test directory's filesystem without root), and compares two scans of it.
func BenchmarkScan(b *testing.B) {
	for _, n := range []int{100, 1_000, 10_000} {
		layer := b.TempDir()
		if os.Geteuid() == 0 {
			layer = tmpfs(b)
		}
		for i := range n {
			d := fmt.Sprintf("%s/root/workspace/d%03d", layer, i/100)
			if i%100 == 0 {
				if err := os.MkdirAll(d, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			if err := os.WriteFile(fmt.Sprintf("%s/f%03d", d, i%100), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Scan(layer, layout); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("compare/files=%d", n), func(b *testing.B) {
			t1, _ := Scan(layer, layout)
			t2, _ := Scan(layer, layout)
			for b.Loop() {
				Compare(t1, t2)
			}
		})
	}
}
