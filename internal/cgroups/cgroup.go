package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Cgroup is one sandbox's cgroup, present in every hierarchy that holds a
// controller airlock uses. Its methods may be called from any goroutine, but
// Set calls must not race with each other.
type Cgroup struct {
	l    *Layout
	id   string              // parent/name, for error messages
	err  error               // invalid parent or name given to Open
	at   [numCtrls]placement // per controller: mount is this cgroup's directory
	dirs []string            // distinct directories, one per hierarchy used, the freezer's last
	v2   string              // the unified-hierarchy directory, "" if unused
	// pristine is true while every limit still has the kernel's default
	// value (the cgroup was just created), so Set can skip writing
	// "unlimited" values.
	pristine atomic.Bool
}

// Open returns a handle to the cgroup parent/name without touching the
// filesystem, e.g. to clean up after a crash. An invalid parent or name makes
// every method of the handle fail.
func (l *Layout) Open(parent, name string) *Cgroup {
	c := &Cgroup{l: l, id: path.Join(parent, name)}
	if err := validPath(parent, true); err != nil {
		c.err = fmt.Errorf("cgroup %s: parent: %w", c.id, err)
		return c
	}
	if err := validPath(name, false); err != nil || strings.Contains(name, "/") {
		c.err = fmt.Errorf("cgroup %s: invalid name %q", c.id, name)
		return c
	}
	for i := ctrl(0); i < numCtrls; i++ {
		p := l.place[i]
		if p.mount == "" {
			continue
		}
		dir := path.Join(p.mount, parent, name)
		c.at[i] = placement{mount: dir, v2: p.v2}
		if p.v2 {
			c.v2 = dir
		}
		if !slices.Contains(c.dirs, dir) {
			c.dirs = append(c.dirs, dir)
		}
	}
	if len(c.dirs) == 0 {
		c.err = fmt.Errorf("cgroup %s: no cgroup controllers available", c.id)
	}
	// The freezer's directory goes last: Destroy removes directories in
	// this order, and if a later one were busy, Kill would need it.
	if f := c.at[freezerCtrl].mount; f != "" {
		c.dirs = append(slices.DeleteFunc(c.dirs, func(d string) bool { return d == f }), f)
	}
	return c
}

// validPath accepts slash-separated components of letters, digits, '_', '-'
// and '.', none starting with '.'. This keeps "..", absolute paths and hidden
// names out: a handle to the hierarchy root would let Kill signal the whole
// system.
func validPath(p string, emptyOK bool) error {
	if p == "" {
		if emptyOK {
			return nil
		}
		return errors.New("empty")
	}
	for _, comp := range strings.Split(p, "/") {
		if comp == "" || comp[0] == '.' || len(comp) > 255 {
			return fmt.Errorf("invalid component %q", comp)
		}
		for _, r := range comp {
			ok := r == '_' || r == '-' || r == '.' || (r >= 'a' && r <= 'z') ||
				(r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
			if !ok {
				return fmt.Errorf("invalid character %q in %q", r, comp)
			}
		}
	}
	return nil
}

// ValidParent checks a cgroup parent of the configuration: what Open accepts, not empty (the
// hierarchy's root is never a sandbox's parent).
func ValidParent(p string) error { return validPath(p, false) }

// New creates parent/name in every hierarchy airlock uses, creating parents
// as needed and, on v2, enabling the cpu, memory and pids controllers along
// the root→parent chain. An existing cgroup is accepted if it holds no
// processes; one with processes yields an error wrapping fs.ErrExist.
func (l *Layout) New(parent, name string) (*Cgroup, error) {
	c := l.Open(parent, name)
	if c.err != nil {
		return nil, c.err
	}
	if c.v2 != "" {
		if err := l.prepareV2(parent); err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", c.id, err)
		}
	}
	existed := false
	var made []string
	// On failure, undo this call's mkdirs so no half-created sandbox is
	// left behind; directories that already existed are not ours to remove.
	fail := func(err error) (*Cgroup, error) {
		for _, d := range slices.Backward(made) {
			_ = unix.Rmdir(d)
		}
		return nil, err
	}
	for _, dir := range c.dirs {
		err := unix.Mkdir(dir, 0o755)
		if errors.Is(err, unix.ENOENT) {
			// First sandbox under this parent (or the parent was removed
			// since): create the chain and, for v2, re-enable controllers.
			if dir == c.v2 {
				l.forget(parent)
				err = l.prepareV2(parent)
			} else {
				err = os.MkdirAll(path.Dir(dir), 0o755)
			}
			if err == nil {
				err = unix.Mkdir(dir, 0o755)
			}
		}
		switch {
		case errors.Is(err, unix.EEXIST):
			existed = true
		case err != nil:
			return fail(fmt.Errorf("cgroup %s: mkdir %s: %w", c.id, dir, err))
		default:
			made = append(made, dir)
		}
	}
	if existed {
		pids, err := c.Procs()
		if err != nil {
			return fail(err)
		}
		if len(pids) > 0 {
			return fail(fmt.Errorf("cgroup %s: exists with %d processes: %w", c.id, len(pids), fs.ErrExist))
		}
	}
	c.pristine.Store(!existed)
	return c, nil
}

// prepareV2 makes sure every cgroup from the unified root down to parent
// exists and delegates the v2 controllers airlock uses to its children.
func (l *Layout) prepareV2(parent string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.prepared[parent] {
		return nil
	}
	var enable []string
	for _, c := range []ctrl{cpuCtrl, memoryCtrl, pidsCtrl} {
		if l.place[c].v2 {
			enable = append(enable, "+"+c.String())
		}
	}
	dir := l.unified
	comps := []string{""}
	if parent != "" {
		comps = append(comps, strings.Split(parent, "/")...)
	}
	for i, comp := range comps {
		if i > 0 {
			dir += "/" + comp
			if err := unix.Mkdir(dir, 0o755); err != nil && err != unix.EEXIST {
				return fmt.Errorf("mkdir %s: %w", dir, err)
			}
		}
		if len(enable) == 0 {
			continue
		}
		file := dir + "/cgroup.subtree_control"
		if err := writeFile(file, strings.Join(enable, " ")); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
	}
	l.prepared[parent] = true
	return nil
}

// forget drops parent from the prepared cache after it turned out to be gone.
func (l *Layout) forget(parent string) {
	l.mu.Lock()
	delete(l.prepared, parent)
	l.mu.Unlock()
}

// RemoveParent removes parent's own directory from every cgroup hierarchy mounted on the host —
// those airlock's controllers use and those a runtime (runc) also made it in — where it is empty:
// the kernel refuses to remove a cgroup with children or processes (EBUSY), so a parent still in
// use stays, and one already gone is no error. A driver calls it at a clean stop for its parent,
// which is its instance's own (<level parent>/<instance>: no other airlock uses it).
func (l *Layout) RemoveParent(parent string) error {
	if err := validPath(parent, false); err != nil {
		return fmt.Errorf("cgroups: remove %q: %w", parent, err)
	}
	l.forget(parent)
	var errs []error
	for _, m := range l.mounts {
		switch err := unix.Rmdir(path.Join(m, parent)); err {
		case nil, unix.ENOENT, unix.EBUSY, unix.ENOTEMPTY:
		default:
			errs = append(errs, fmt.Errorf("cgroups: remove %s: %w", path.Join(m, parent), err))
		}
	}
	return errors.Join(errs...)
}

// List returns the names of the cgroups under parent in any hierarchy, so a
// sandbox left half-created by a crash is still found.
func (l *Layout) List(parent string) ([]string, error) {
	if err := validPath(parent, true); err != nil {
		return nil, fmt.Errorf("cgroups: list %q: %w", parent, err)
	}
	seen := map[string]bool{}
	for c := ctrl(0); c < numCtrls; c++ {
		if l.place[c].mount == "" {
			continue
		}
		dir := path.Join(l.place[c].mount, parent)
		names, err := subdirs(dir)
		if err != nil {
			return nil, fmt.Errorf("cgroups: list %s: %w", dir, err)
		}
		for _, n := range names {
			seen[n] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// Paths returns the cgroup's directories, one per hierarchy used.
func (c *Cgroup) Paths() []string { return append([]string(nil), c.dirs...) }

// AddProc moves pid into the cgroup in every hierarchy used.
func (c *Cgroup) AddProc(pid int) error {
	if c.err != nil {
		return c.err
	}
	s := strconv.Itoa(pid)
	for _, dir := range c.dirs {
		if err := writeFile(dir+"/cgroup.procs", s); err != nil {
			return fmt.Errorf("cgroup %s: write %s/cgroup.procs: %w", c.id, dir, err)
		}
	}
	return nil
}

// Procs returns the sorted union of the pids in the cgroup and its nested
// child cgroups across every hierarchy used. A cgroup that does not exist
// has no processes.
func (c *Cgroup) Procs() ([]int, error) {
	if c.err != nil {
		return nil, c.err
	}
	set := map[int]struct{}{}
	for _, dir := range c.dirs {
		if err := c.collect(dir, set); err != nil {
			return nil, err
		}
	}
	out := make([]int, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Ints(out)
	return out, nil
}

func (c *Cgroup) collect(dir string, set map[int]struct{}) error {
	b, err := readFile(dir + "/cgroup.procs")
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cgroup %s: read %s/cgroup.procs: %w", c.id, dir, err)
	}
	if err := parsePids(b, set); err != nil {
		return fmt.Errorf("cgroup %s: parse %s/cgroup.procs: %w", c.id, dir, err)
	}
	kids, err := subdirs(dir)
	if err != nil {
		return fmt.Errorf("cgroup %s: list %s: %w", c.id, dir, err)
	}
	for _, k := range kids {
		if err := c.collect(dir+"/"+k, set); err != nil {
			return err
		}
	}
	return nil
}
