package cluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// loopNetns is a network namespace of its own with only lo, held by one OS thread: a process
// started from that thread (do) is in it. The agent-sandbox controller runs there, because its
// webhook server listens on every interface (its address is not a flag, only its port): in
// this namespace every interface is one loopback. forward links it to the host's loopback.
type loopNetns struct {
	calls chan func()
	quit  chan struct{}
	once  sync.Once
}

// newLoopNetns makes the namespace: a goroutine locked to its thread unshares the thread's
// network namespace and brings lo up, then runs do's functions there until close. It never
// unlocks the thread, so Go ends the thread (and the namespace goes, once nothing else holds
// it) when the goroutine returns, and no other goroutine ever runs in the namespace.
func newLoopNetns() (*loopNetns, error) {
	n := &loopNetns{calls: make(chan func()), quit: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- fmt.Errorf("a network namespace: %w", err)
			return
		}
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			ready <- fmt.Errorf("loopback up: %w", err)
			return
		}
		ready <- nil
		for {
			select {
			case f := <-n.calls:
				f()
			case <-n.quit:
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return n, nil
}

// do runs f on the namespace's thread: the sockets it makes and the processes it starts are in
// the namespace (a process started there gets its Pdeathsig when that thread ends, at close).
func (n *loopNetns) do(f func()) error {
	done := make(chan struct{})
	select {
	case n.calls <- func() { f(); close(done) }:
	case <-n.quit:
		return errors.New("the network namespace is closed")
	}
	<-done
	return nil
}

// close ends the namespace's thread.
func (n *loopNetns) close() { n.once.Do(func() { close(n.quit) }) }

// forward accepts on l until it is closed, and joins each connection to one dial makes.
func forward(l net.Listener, dial func() (net.Conn, error)) {
	for {
		in, err := l.Accept()
		if err != nil {
			return // closed
		}
		go func() {
			defer in.Close()
			out, err := dial()
			if err != nil {
				return // the client sees its connection closed
			}
			defer out.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(out, in) // ends with either side
				closeWrite(out)
				close(done)
			}()
			_, _ = io.Copy(in, out)
			closeWrite(in)
			<-done
		}()
	}
}

// closeWrite half-closes a TCP connection: the peer reads EOF and may still answer.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
