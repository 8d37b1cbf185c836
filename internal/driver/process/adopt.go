package process

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// A daemon that dies (a crash, kill -9, an upgrade) leaves its sandboxes' inits without a host.
// With Config.OrphanGrace set, each init also holds a listening socket in the state dir
// (StateDir/run/<id>); it keeps the sandbox through the grace and hands it to whoever connects:
// the restarted daemon, which verifies that the pid is still that init (start time, cgroup, uid
// map) and that it answers (host.Runtime.Adopt).

var _ driver.Adopter = (*Driver)(nil)

// adoptSocket is where sandbox id's init listens for a new driver.
func (d *Driver) adoptSocket(id string) string { return filepath.Join(d.cfg.StateDir, "run", id) }

// listenAdopt makes the socket init will listen on. Only host root can reach it (0700 directory).
func (d *Driver) listenAdopt(id string) (*os.File, error) {
	dir := filepath.Join(d.cfg.StateDir, "run")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("adopt socket: %w", err)
	}
	path := d.adoptSocket(id)
	os.Remove(path)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("adopt socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("adopt socket %s: %w", path, err)
	}
	if err := unix.Listen(fd, 4); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return nil, fmt.Errorf("adopt socket: %w", err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// Adopt implements driver.Adopter: it takes over sandbox id, made by an airlock process that is
// gone, from the facts its Sandbox reported (HostFacts). It fails, changing nothing, unless the
// pid is still that sandbox's init (same start time, inside the sandbox's cgroup, its uid range
// mapped) and init answers (a frozen, i.e. paused, sandbox cannot: it is adopted paused without
// the question). A sandbox whose facts name no uid range (made by an older airlock, whose
// sandboxes shared one) is not adopted: it is reclaimed, as it would be were it not adoptable.
func (d *Driver) Adopt(ctx context.Context, id string, spec sandbox.Spec, facts json.RawMessage) (driver.Sandbox, error) {
	var f host.Facts
	if err := json.Unmarshal(facts, &f); err != nil || f.Pid <= 0 || f.Socket == "" {
		return nil, fmt.Errorf("sandbox %s: no adoption facts recorded", id)
	}
	if !procfs.Alive(f.Pid, f.StartTime) {
		return nil, fmt.Errorf("sandbox %s: init (pid %d) is gone", id, f.Pid)
	}
	cg := d.cgroups.Open(d.cfg.CgroupParent, id)
	if procs, err := cg.Procs(); err != nil || !slices.Contains(procs, f.Pid) {
		return nil, fmt.Errorf("sandbox %s: pid %d is not in the sandbox's cgroup", id, f.Pid)
	}
	// A frozen init cannot count its grace (alive.go): past it, the sandbox is not adopted.
	frozen, _ := cg.Frozen()
	if gone, late := d.orphanedTooLong(); frozen && late {
		return nil, fmt.Errorf("sandbox %s: paused, and orphaned for %v, past its grace of %v", id, gone.Round(time.Millisecond), d.cfg.OrphanGrace)
	}
	if f.UIDs == nil {
		return nil, fmt.Errorf("sandbox %s: no uid range of its own recorded", id)
	}
	if err := d.rt.AdoptUIDs(sandbox.LevelProcess, id, f.Pid, *f.UIDs); err != nil {
		return nil, err
	}
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: f.Socket, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: connect to init: %w", id, err)
	}
	a := host.Adoption{Pid: f.Pid, Conn: c, Cgroup: cg, UIDs: *f.UIDs, Paused: frozen}
	if f.NetSlot != nil {
		if d.cfg.Network == nil {
			c.Close()
			return nil, fmt.Errorf("sandbox %s: networked, and this process has no network service", id)
		}
		if a.Gateway, err = d.cfg.Network.Adopt(id, f.Pid, *f.NetSlot, spec.Network); err != nil {
			c.Close()
			return nil, fmt.Errorf("sandbox %s: network: %w", id, err)
		}
	}
	s, err := d.rt.Adopt(ctx, id, spec, a, d.launcher(id, spec, *f.UIDs, nil, nil))
	if err != nil {
		return nil, err
	}
	d.log.Info("sandbox adopted", "sandbox", id, "pid", f.Pid, "paused", frozen)
	return s, nil
}
