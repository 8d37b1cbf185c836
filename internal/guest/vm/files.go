package vm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/fsroot"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/guest/vmlink"
)

// fileServer serves the files API from inside the VM (vmlink.Files*): the host never reads a
// VM's disk. Each call resolves its path beneath the sandbox's root as init's processes see it
// (init's /proc/PID/root), with the sandbox user's filesystem ids — fsroot's checks, as the host
// makes them on the other levels.
type fileServer struct {
	link    *vmlink.Guest
	initPid int

	mu       sync.Mutex // guards uid, gid and set
	uid, gid int
	set      bool // init's configuration was seen: the sandbox's user is known
}

// configured records the sandbox's user from init's configuration (the agent's Rewrite sees it).
func (f *fileServer) configured(c *guest.Config) {
	f.mu.Lock()
	f.uid, f.gid, f.set = int(c.UID), int(c.GID), true
	f.mu.Unlock()
}

// root opens the sandbox's root for one call.
func (f *fileServer) root() (*fsroot.Root, error) {
	f.mu.Lock()
	uid, gid, set := f.uid, f.gid, f.set
	f.mu.Unlock()
	if !set {
		return nil, errors.New("the sandbox is not set up yet")
	}
	dir, err := os.Open(fmt.Sprintf("/proc/%d/root", f.initPid))
	if err != nil {
		return nil, fmt.Errorf("the sandbox's root: %w", err)
	}
	return fsroot.NewAsOwner(dir, uid, gid), nil
}

// handle answers a files call of kind; ok is false for a kind that is not one.
func (f *fileServer) handle(kind string, body json.RawMessage) (reply any, ok bool, err error) {
	var c vmlink.FileCall
	var sb vmlink.StreamBody
	switch kind {
	case vmlink.FilesOpen, vmlink.FilesWrite:
		if err := json.Unmarshal(body, &sb); err != nil {
			return nil, true, err
		}
		body = sb.Body
	case vmlink.FilesStat, vmlink.FilesList, vmlink.FilesMkdir, vmlink.FilesRemove:
	default:
		return nil, false, nil
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, true, err
	}
	var in *os.File
	if kind == vmlink.FilesWrite {
		if in, err = f.link.Upload(sb.Stream); err != nil {
			return nil, true, err
		}
		defer in.Close()
	}
	r, err := f.root()
	if err != nil {
		return nil, true, err
	}
	defer r.Close()
	var out vmlink.FileReply
	var info api.FileInfo
	switch kind {
	case vmlink.FilesOpen:
		var file *os.File
		file, info, err = r.Open(c.Path)
		if err == nil {
			w, serr := f.link.SendStream(sb.Stream)
			if serr != nil {
				file.Close()
				return nil, true, serr
			}
			go func() {
				_, _ = io.Copy(w, file)
				w.Close()
				file.Close()
			}()
		}
	case vmlink.FilesStat:
		info, err = r.Stat(c.Path)
	case vmlink.FilesList:
		out.List, err = r.List(c.Path)
	case vmlink.FilesWrite:
		info, err = r.Write(c.Path, in, c.Mode, c.Limit, c.Parents)
	case vmlink.FilesMkdir:
		info, err = r.Mkdir(c.Path, c.Parents)
	case vmlink.FilesRemove:
		err = r.Remove(c.Path, c.Recursive)
	}
	if err != nil {
		out.Err = vmlink.NewFileError(err)
	} else if kind != vmlink.FilesList && kind != vmlink.FilesRemove {
		out.Info = &info
	}
	return out, true, nil
}
