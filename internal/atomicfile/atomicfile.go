// Package atomicfile writes a file so that a reader sees the old content or the new, never a
// part: a temporary file beside it, synced, given its mode, renamed into place.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile writes data to path with mode perm, atomically; on an error nothing is left but what
// path held before.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), perm)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
