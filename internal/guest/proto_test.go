package guest_test

import (
	"errors"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/guest"
	"github.com/airlockrun/airlock/internal/sandbox"
)

func TestDecode(t *testing.T) {
	exec := &guest.Message{Kind: guest.MsgExec, ID: "e1", Exec: &guest.ExecSpec{Argv: []string{"sh", "-c", "true"}, TTY: &sandbox.Winsize{Rows: 2, Cols: 3}}}
	good, _, err := guest.Encode(exec, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		b     []byte
		flags int
		err   error
	}{
		{"a message", good, 0, nil},
		{"the peer closed", nil, 0, net.ErrClosed},
		{"truncated", good, unix.MSG_TRUNC, guest.ErrMalformed},
		{"control message truncated", good, unix.MSG_CTRUNC, guest.ErrMalformed},
		{"not JSON", []byte("{"), 0, guest.ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, fds, err := guest.Decode(c.b, nil, c.flags)
			if !errors.Is(err, c.err) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if len(fds) != 0 {
				t.Errorf("fds = %v", fds)
			}
			if c.err == nil && (m.Kind != exec.Kind || m.ID != exec.ID || len(m.Exec.Argv) != 3 || *m.Exec.TTY != *exec.Exec.TTY) {
				t.Errorf("decoded %+v, want %+v", m, exec)
			}
		})
	}
}

// TestDescriptors sends a message with a descriptor over a socket pair, as the host does an
// exec's stdio, and reads it back as init does.
func TestDescriptors(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, oob, err := guest.Encode(&guest.Message{Kind: guest.MsgLayer, ID: "l1"}, []int{int(f.Fd())})
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Sendmsg(fds[0], b, oob, nil, 0); err != nil {
		t.Fatal(err)
	}
	buf, roob := make([]byte, guest.MaxReply), make([]byte, unix.CmsgSpace(4*guest.MaxRecvFds))
	n, oobn, flags, _, err := unix.Recvmsg(fds[1], buf, roob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	m, got, err := guest.Decode(buf[:n], roob[:oobn], flags)
	if err != nil || m.Kind != guest.MsgLayer || m.ID != "l1" || len(got) != 1 {
		t.Fatalf("decoded %+v with %v: %v", m, got, err)
	}
	unix.Close(got[0])
}
