package hosttemplate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Etc returns a host directory holding the host template's /etc: the generated accounts and name
// files (resolver is the name server: see Resolver) plus copies of the few host entries programs
// need. It is built once per host state (keyed by the entries' sizes and times) and name server
// (none, or the resolver of networked sandboxes) under the state directory and bound read-only
// into every sandbox: one mount instead of one per file.
func (t *Host) Etc(resolver string) (string, error) {
	t.etcMu.Lock()
	defer t.etcMu.Unlock()
	if dir, ok := t.etcDirs[resolver]; ok {
		return dir, nil
	}
	dir, err := t.buildEtc(resolver)
	if err != nil {
		return "", err
	}
	if t.etcDirs == nil {
		t.etcDirs = map[string]string{}
	}
	t.etcDirs[resolver] = dir
	return dir, nil
}

// etcFormat changes whenever the generated content changes, so old caches are not reused.
const etcFormat = "etc-v2"

func (t *Host) buildEtc(resolver string) (string, error) {
	h := sha256.New()
	_, _ = io.WriteString(h, etcFormat+"\n"+resolver+"\n")
	for _, e := range t.etc {
		if fi, err := os.Lstat("/etc/" + e); err == nil {
			fmt.Fprintf(h, "%s %d %d %v\n", e, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
		}
	}
	dir := filepath.Join(t.stateDir, "etc-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(t.stateDir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(t.stateDir, ".etc-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	for _, e := range t.etc {
		if err := copyPublic("/etc/"+e, filepath.Join(tmp, e)); err != nil {
			return "", err
		}
	}
	for _, f := range EtcFiles(true, resolver) {
		if err := os.WriteFile(filepath.Join(tmp, filepath.Base(f.Path)), []byte(f.Content), os.FileMode(f.Mode)); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return dir, nil // another airlock built it first
		}
		return "", err
	}
	return dir, nil
}

// copyPublic copies a file tree, keeping symlinks as links and copying only what every host user
// may read: /etc/ssl/private and the like stay on the host.
func copyPublic(src, dst string) error {
	return filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: not public
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil
			}
			return os.Symlink(target, out)
		case fi.IsDir():
			if fi.Mode().Perm()&0o005 != 0o005 {
				return filepath.SkipDir
			}
			return os.Mkdir(out, 0o755)
		case fi.Mode().IsRegular() && fi.Mode().Perm()&0o004 != 0:
			in, err := os.Open(p)
			if err != nil {
				return nil
			}
			defer in.Close()
			w, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_EXCL, fi.Mode().Perm()&0o755|0o444)
			if err != nil {
				return err
			}
			if _, err := io.Copy(w, in); err != nil {
				w.Close()
				return err
			}
			return w.Close()
		}
		return nil
	})
}
