package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKBFields(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    map[string]int64
		wantErr bool
	}{
		{"status", "Name:\tairlock\nVmRSS:\t   74012 kB\nRssAnon:\t   8000 kB\n", map[string]int64{"VmRSS": 74012, "RssAnon": 8000}, false},
		{"missing", "Name:\tairlock\nVmRSS:\t   74012 kB\n", nil, true},
		{"garbled", "VmRSS:\t   lots kB\nRssAnon:\t1 kB\n", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "status")
			if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := kbFields(p, "VmRSS", "RssAnon")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %d, want %d", k, got[k], v)
				}
			}
		})
	}
}

func TestDescendantsOfThisProcess(t *testing.T) {
	if _, err := statusFields(os.Getpid(), "VmRSS", "RssAnon"); err != nil {
		t.Fatalf("this process's status: %v", err)
	}
	for _, p := range descendants(os.Getppid()) {
		if p == os.Getpid() {
			return
		}
	}
	t.Errorf("descendants(%d) does not list this process %d", os.Getppid(), os.Getpid())
}
