package microvm

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestTemplateCheckShared: a walk of the host template one airlock process recorded less than
// templateRecheck ago spares another process its own walk (the image is taken as recorded); an
// older record, one naming a file outside the image directory or an image gone, is not taken.
func TestTemplateCheckShared(t *testing.T) {
	dir := t.TempDir()
	// A source that cannot be walked: a template() that walks fails.
	mounts := []ShareMount{{Src: filepath.Join(dir, "no-such-tree"), Dst: "/"}}
	img := filepath.Join(dir, "tpl-0123.erofs")
	if err := os.WriteFile(img, []byte("image"), 0o400); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "tpl-0123.erofs")
	if err := os.WriteFile(outside, []byte("image"), 0o400); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		image string
		age   time.Duration
		taken bool
	}{
		{"recent", img, 10 * time.Second, true},
		{"old", img, templateRecheck + time.Second, false},
		{"from the future", img, -time.Hour, false},
		{"outside the image directory", outside, time.Second, false},
		{"image gone", filepath.Join(dir, "tpl-gone.erofs"), time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newRootImages(dir, "", "", log).recordChecked(mounts, tc.image, time.Now().Add(-tc.age))
			r := newRootImages(dir, "", "", log)
			defer r.release()
			got, err := r.template(context.Background(), mounts)
			if tc.taken && (err != nil || got != img) {
				t.Fatalf("template = %q, %v; want the recorded %s", got, err, img)
			}
			if !tc.taken && err == nil {
				t.Fatalf("template = %q without a walk; want the walk (which fails here)", got)
			}
		})
	}
}
