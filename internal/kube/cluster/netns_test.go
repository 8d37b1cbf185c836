package cluster

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/testutil"
)

// TestLoopNetns: a listener made in the namespace on every interface is reachable only through
// forward from the host's loopback; the namespace has no interface but lo, and its thread is
// in another network namespace than the test's.
func TestLoopNetns(t *testing.T) {
	testutil.RequiresRoot(t, "unsharing a network namespace")
	ns, err := newLoopNetns()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.close()
	var (
		inner  net.Listener
		ifaces []net.Interface
		nsLink string
	)
	if err := ns.do(func() {
		inner, err = net.Listen("tcp", ":0") // every interface, as the controller's webhook
		ifaces, _ = net.Interfaces()
		nsLink, _ = os.Readlink("/proc/thread-self/ns/net")
	}); err != nil || inner == nil {
		t.Fatalf("listen in the namespace: %v %v", err, inner)
	}
	defer inner.Close()
	if hostLink, _ := os.Readlink("/proc/thread-self/ns/net"); nsLink == "" || nsLink == hostLink {
		t.Errorf("the namespace's thread is in %q, the test in %q", nsLink, hostLink)
	}
	if len(ifaces) != 1 || ifaces[0].Name != "lo" || ifaces[0].Flags&net.FlagUp == 0 {
		t.Errorf("interfaces in the namespace: %+v, want lo alone, up", ifaces)
	}
	port := inner.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := inner.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			_, _ = c.Write([]byte("echo " + line))
			c.Close()
		}
	}()
	// Not on the host: nothing listens on the port there (the forwarder takes another one).
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
		c.Close()
		t.Errorf("the namespace's listener answered on the host's loopback")
	}
	outer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Close()
	go forward(outer, func() (conn net.Conn, err error) {
		if derr := ns.do(func() { conn, err = net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))) }); derr != nil {
			return nil, derr
		}
		return conn, err
	})
	c, err := net.DialTimeout("tcp", outer.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(c).ReadString('\n'); got != "echo hello\n" {
		t.Errorf("through the forwarder: %q, %v", got, err)
	}
	ns.close()
	if err := ns.do(func() {}); err == nil {
		t.Errorf("do after close ran")
	}
}
