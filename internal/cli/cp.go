package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// cpCmd is `airlock cp`: copy one file into a sandbox (cp LOCAL ID:/PATH) or out of one
// (cp ID:/PATH LOCAL); a relative PATH starts at the sandbox's workdir. LOCAL "-" is stdin or stdout. A destination that is a directory gets the
// source's name in it. Files stream in both directions; a download is written to a temporary
// file next to LOCAL and renamed into place, so a failed copy leaves nothing half-written.
func cpCmd(e *env, args []string) int {
	r := newRemote(e, "cp", "[--mode MODE] LOCAL ID:/PATH | ID:/PATH LOCAL")
	modeFlag := r.fs.String("mode", "", "permission bits of an uploaded file, e.g. 0755 (default: the local file's)")
	pos, code := r.parse(args, true)
	if code >= 0 {
		return code
	}
	if len(pos) != 2 {
		return r.usageError("want a source and a destination")
	}
	src, dst := parseCopyArg(pos[0]), parseCopyArg(pos[1])
	if (src.id == "") == (dst.id == "") {
		return r.usageError("one of source and destination must be ID:/PATH, the other local")
	}
	for _, a := range []copyArg{src, dst} {
		if a.id != "" && a.path == "" {
			return r.usageError("%s: name a path inside the sandbox (ID:/PATH)", a.id)
		}
	}
	var mode os.FileMode
	if *modeFlag != "" {
		m, err := strconv.ParseUint(*modeFlag, 8, 32)
		if err != nil || m > 0o777 {
			return r.usageError("--mode %q: want octal permission bits such as 0644", *modeFlag)
		}
		mode = os.FileMode(m)
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	var err error
	if dst.id != "" {
		err = upload(ctx, r, src.path, dst, mode)
	} else {
		err = download(ctx, r, src, dst.path)
	}
	if err != nil {
		return r.fail(err, nil)
	}
	return 0
}

// copyArg is one side of cp: ID:/path inside a sandbox, or a local path (id empty).
type copyArg struct{ id, path string }

// parseCopyArg reads ID:/PATH; anything whose part before the first colon is empty or holds a
// slash (./a:b, /tmp/x:y) is a local path.
func parseCopyArg(s string) copyArg {
	id, p, ok := strings.Cut(s, ":")
	if !ok || id == "" || strings.Contains(id, "/") {
		return copyArg{path: s}
	}
	return copyArg{id: id, path: p}
}

func upload(ctx context.Context, r *remote, local string, dst copyArg, mode os.FileMode) error {
	var in io.Reader = r.stdin
	name := ""
	if local != "-" {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory; cp copies single files", local)
		}
		if mode == 0 {
			mode = fi.Mode().Perm()
		}
		in, name = f, filepath.Base(local)
	}
	if in == nil {
		return errors.New("no stdin to upload")
	}
	target := dst.path
	isDir := strings.HasSuffix(target, "/")
	if !isDir {
		fi, err := r.c.StatFile(ctx, dst.id, target)
		switch {
		case err == nil:
			isDir = fi.Type == api.FileDir
		case !errors.Is(err, client.ErrNotFound):
			return err
		}
	}
	if isDir {
		if name == "" {
			return fmt.Errorf("%s:%s is a directory; name the file to write stdin to", dst.id, dst.path)
		}
		target = path.Join(target, name)
	}
	_, err := r.c.WriteFile(ctx, dst.id, target, in, mode)
	return err
}

func download(ctx context.Context, r *remote, src copyArg, local string) error {
	fi, err := r.c.StatFile(ctx, src.id, src.path)
	if err != nil {
		return err
	}
	if fi.Type == api.FileDir {
		return fmt.Errorf("%s:%s is a directory; cp copies single files", src.id, src.path)
	}
	rc, err := r.c.ReadFile(ctx, src.id, src.path)
	if err != nil {
		return err
	}
	defer rc.Close()
	if local == "-" {
		_, err := io.Copy(r.stdout, rc)
		return err
	}
	if st, err := os.Stat(local); err == nil && st.IsDir() {
		local = filepath.Join(local, path.Base(src.path))
	}
	mode := os.FileMode(0o644)
	if m, err := strconv.ParseUint(fi.Mode, 8, 32); err == nil {
		mode = os.FileMode(m).Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(local), "."+filepath.Base(local)+".airlock-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := io.Copy(tmp, rc); err != nil {
		tmp.Close()
		return fmt.Errorf("downloading %s:%s: %w", src.id, src.path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), local)
}
