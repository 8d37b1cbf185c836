package microvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/guest/vmlink"
	"github.com/airlockrun/airlock/internal/procfs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// A VM outlives the airlock process that made it when Config.OrphanGrace is set: the VMM runs in
// a session of its own with no parent-death signal, in its own cgroup, and its serial port and
// monitor listen on unix sockets in the VM's directory, root's alone (QEMU accepts a new client
// once the old one is gone). The guest agent, which finds its host gone (the port reads EOF),
// keeps init and the sandbox as they are for the grace and waits for a host that presents the
// link's token (vmlink.AdoptHost); past the grace it ends the VM. The next airlock process
// adopts the VM from the facts the store kept (HostFacts): it checks that the pid is still that
// VMM (start time, in the VM's cgroup, running as the VM's uid), connects to its monitor and
// serial port, and takes the link over with the token — the agent answering with it is the
// proof that this is the same VM — then init answers as on any level (host.Runtime.Adopt).

var (
	_ driver.Adopter    = (*Driver)(nil)
	_ driver.HostFacter = (*Sandbox)(nil)
)

// vmFacts are what a later airlock process needs to adopt a VM (HostFacts).
type vmFacts struct {
	host.Facts
	Token   string  `json:"token"`  // the link's (vmlink.AdoptHost)
	Images  []Image `json:"images"` // the read-only images it runs on
	Machine bool    `json:"machine"`
	Accel   string  `json:"accel"`
}

// HostFacts implements driver.HostFacter: the VMM's pid and start time, its uid range and
// network, the link's token, and what a memory snapshot of the VM needs. A VM that dies with its
// airlock (OrphanGrace 0) has none: it is reclaimed.
func (s *Sandbox) HostFacts() json.RawMessage {
	in := s.in
	if in.d.cfg.OrphanGrace <= 0 || in.link == nil {
		return nil
	}
	f := vmFacts{Token: in.link.Token(), Images: in.images, Machine: in.machine, Accel: in.shape.Accel}
	if err := json.Unmarshal(s.hs.HostFacts(), &f.Facts); err != nil {
		return nil
	}
	b, _ := json.Marshal(f)
	return b
}

// adoptWait bounds the wait for the guest agent's answer to the link's token.
const adoptWait = 5 * time.Second

// Adopt implements driver.Adopter: it takes over VM id, made by an airlock process that is gone,
// from the facts its Sandbox reported (HostFacts). It fails, leaving the VM as it is (the manager
// then reclaims it), unless the pid is still that VM's VMM (same start time, in the VM's cgroup,
// running as the first uid of the VM's range), its guest agent answers with the link's token and
// init answers. A paused VM is run for the agent's answer and paused again.
func (d *Driver) Adopt(ctx context.Context, id string, spec sandbox.Spec, facts json.RawMessage) (driver.Sandbox, error) {
	if c := d.Capabilities(); !c.Available {
		return nil, fmt.Errorf("microvm level: %s: %w", c.Reason, errdefs.ErrUnavailable)
	}
	if d.cfg.OrphanGrace <= 0 {
		return nil, fmt.Errorf("sandbox %s: this airlock adopts no VMs (microvm.orphanGraceSeconds is 0)", id)
	}
	var f vmFacts
	if err := json.Unmarshal(facts, &f); err != nil || f.Pid <= 0 || f.Token == "" || f.UIDs == nil {
		return nil, fmt.Errorf("sandbox %s: no adoption facts recorded", id)
	}
	if !procfs.Alive(f.Pid, f.StartTime) {
		return nil, fmt.Errorf("sandbox %s: its VMM (pid %d) is gone", id, f.Pid)
	}
	cg := d.cgroups.Open(d.cfg.CgroupParent, id)
	if procs, err := cg.Procs(); err != nil || !slices.Contains(procs, f.Pid) {
		return nil, fmt.Errorf("sandbox %s: pid %d is not in the VM's cgroup", id, f.Pid)
	}
	if uid, err := procUID(f.Pid); err != nil {
		return nil, fmt.Errorf("sandbox %s: the VMM's uid: %w", id, err)
	} else if uid != f.UIDs.HostID(0) {
		return nil, fmt.Errorf("sandbox %s: pid %d runs as uid %d, not the VM's %d", id, f.Pid, uid, f.UIDs.HostID(0))
	}
	dir := filepath.Join(d.cfg.StateDir, "vms", id)
	in := &vmInst{d: d, id: id, dir: dir, disk: filepath.Join(dir, "disk.img"), images: f.Images, machine: f.Machine,
		uids: *f.UIDs, cg: cg, pids: spec.Resources.MaxProcesses + guest.InitTasks,
		shape: d.shapeOf(spec, f.Accel, f.Images), ks: &kernelStats{paused: &atomic.Bool{}}}
	var ctlHost *os.File
	fail := func(err error) (driver.Sandbox, error) {
		// The VM is left as it was: its agent waits for the next host, within its grace.
		if in.link != nil {
			in.link.Close()
		}
		if ctlHost != nil {
			ctlHost.Close()
		}
		if q, ok := in.v.(*qemuVM); ok {
			q.qmp.close()
		}
		if in.ram != nil {
			in.ram.Close()
		}
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	v, err := d.vmm.Attach(f.Pid, dir)
	if err != nil {
		return fail(err)
	}
	in.v = v
	q := v.(*qemuVM)
	status, err := q.status(ctx)
	if err != nil {
		return fail(err)
	}
	paused := status != "running"
	if in.ram, err = findRAM(f.Pid); err != nil {
		return fail(err)
	}
	port, err := dialUnix(ControlSocket(dir))
	if err != nil {
		return fail(fmt.Errorf("the VM's serial port: %w", err))
	}
	var ctlInit *os.File
	if ctlHost, ctlInit, err = seqPair(); err != nil {
		port.Close()
		return fail(err)
	}
	if paused {
		// The agent answers only while the VM runs (a VM stopped by a save the old airlock
		// did not finish runs again too; the manager then follows its record).
		if err := v.Resume(ctx); err != nil {
			port.Close()
			ctlInit.Close()
			return fail(err)
		}
	}
	in.link, err = vmlink.AdoptHost(port, ctlInit, f.Token, adoptWait)
	if paused {
		if perr := v.Pause(context.WithoutCancel(ctx)); err == nil {
			err = perr
		}
	}
	if err != nil {
		return fail(err)
	}
	in.ks.link = in.link
	in.ks.paused.Store(paused)
	c, err := net.FileConn(ctlHost)
	if err != nil {
		return fail(err)
	}
	ctlHost.Close()
	ctlHost = nil
	conn, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return fail(errors.New("the control socket is not a unix socket"))
	}
	if err := d.rt.AdoptUIDRange(sandbox.LevelMicroVM, id, *f.UIDs); err != nil {
		conn.Close()
		return fail(err)
	}
	a := host.Adoption{Pid: f.Pid, Conn: conn, Cgroup: cg, UIDs: *f.UIDs, Paused: paused}
	if f.NetSlot != nil {
		if d.cfg.Network == nil {
			conn.Close()
			return fail(errors.New("networked, and this process has no network service"))
		}
		if a.Gateway, err = d.cfg.Network.Adopt(id, f.Pid, *f.NetSlot, spec.Network); err != nil {
			conn.Close()
			return fail(fmt.Errorf("network: %w", err))
		}
	}
	s, err := d.rt.Adopt(ctx, id, spec, a, in.launcher())
	if err != nil {
		return fail(err)
	}
	writeOwner(dir) // this process holds the VM now: Sweep leaves it
	d.log.Info("VM adopted", "sandbox", id, "pid", f.Pid, "paused", paused)
	return &Sandbox{hs: s, in: in}, nil
}

// Abandon lets go of the VM without ending it, as the death of the airlock process that made it
// would: the VM waits, for its grace, for a host to Adopt it. Tests play a daemon's crash with
// it.
func (s *Sandbox) Abandon() {
	s.hs.Abandon()
	s.in.link.Close()
	if q, ok := s.in.v.(*qemuVM); ok {
		q.qmp.close()
	}
	s.in.ram.Close()
}

// procUID is the real uid process pid runs as.
func procUID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
	}
	return -1, errors.New("no Uid line")
}

// ramName is the name of a VM's guest RAM (newRAM), as /proc shows the VMM's descriptor of it.
const ramName = "/memfd:airlock-vm-ram"

// findRAM opens the guest RAM of VMM pid again: the memfd the airlock that started it made and
// the VMM holds (descriptor 6 of its jail).
func findRAM(pid int) (*os.File, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("guest RAM: %w", err)
	}
	for _, e := range ents {
		if t, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(t, ramName) {
			f, err := os.OpenFile(filepath.Join(dir, e.Name()), os.O_RDWR, 0)
			if err != nil {
				return nil, fmt.Errorf("guest RAM: %w", err)
			}
			return f, nil
		}
	}
	return nil, fmt.Errorf("guest RAM: no %s among the VMM's descriptors", ramName)
}
