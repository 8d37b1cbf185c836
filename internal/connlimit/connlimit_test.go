package connlimit

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// step is one thing a caps test does: dial from an address and expect the connection to be
// accepted ("") or refused for a reason, or close the i-th accepted connection.
type step struct {
	from  string
	want  string
	close int // 1-based index of an accepted connection to close, when from is ""
}

func TestCaps(t *testing.T) {
	for _, c := range []struct {
		name           string
		max, perClient int
		steps          []step
		open           int // connections open at the end
	}{
		{"per client", 10, 2, []step{
			{from: "127.0.0.1"}, {from: "127.0.0.1"}, {from: "127.0.0.1", want: ReasonClient}, {from: "127.0.0.1", want: ReasonClient},
			{from: "127.0.0.2"}, {from: "127.0.0.2"}, {from: "127.0.0.2", want: ReasonClient},
		}, 4},
		{"total", 3, 2, []step{
			{from: "127.0.0.1"}, {from: "127.0.0.1"}, {from: "127.0.0.2"}, {from: "127.0.0.2", want: ReasonTotal},
			{from: "127.0.0.3", want: ReasonTotal},
		}, 3},
		{"release on close", 2, 1, []step{
			{from: "127.0.0.1"}, {from: "127.0.0.1", want: ReasonClient}, {close: 1}, {from: "127.0.0.1"},
			{from: "127.0.0.2"}, {from: "127.0.0.3", want: ReasonTotal}, {close: 3}, {close: 3}, {from: "127.0.0.3"},
		}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			refused := make(chan string, len(c.steps))
			l := New(inner, Config{Max: c.max, PerClient: c.perClient, OnRefuse: func(r string) { refused <- r }})
			defer l.Close()
			accepted := make(chan net.Conn, len(c.steps))
			go func() {
				for {
					conn, err := l.Accept()
					if err != nil {
						return
					}
					accepted <- conn
				}
			}()
			var conns []net.Conn // accepted, server side
			defer func() {
				for _, conn := range conns {
					conn.Close()
				}
			}()
			for i, s := range c.steps {
				if s.from == "" {
					conns[s.close-1].Close()
					continue
				}
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(s.from)}}
				// A refused connection may be reset before the dial returns.
				cc, err := d.Dial("tcp", inner.Addr().String())
				if err != nil && !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("step %d: dial from %s: %v", i, s.from, err)
				}
				if cc != nil {
					defer cc.Close()
				}
				select {
				case conn := <-accepted:
					conns = append(conns, conn)
					if s.want != "" {
						t.Errorf("step %d: from %s accepted, want refused (%s)", i, s.from, s.want)
					}
				case r := <-refused:
					if r != s.want {
						t.Errorf("step %d: from %s refused (%s), want %q", i, s.from, r, s.want)
					}
					// The client sees the connection end at once.
					if cc != nil {
						if err := cc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
							t.Fatal(err)
						}
						if _, err := cc.Read(make([]byte, 1)); err == nil || isTimeout(err) {
							t.Errorf("step %d: a refused connection reads %v, want its end", i, err)
						}
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("step %d: neither accepted nor refused within 5 s", i)
				}
			}
			if got := l.Open(); got != c.open {
				t.Errorf("Open() = %d, want %d", got, c.open)
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// emfileListener fails its first n Accepts as a process out of file descriptors does.
type emfileListener struct {
	net.Listener
	n int
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.n > 0 {
		l.n--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: &netSyscallError{syscall.EMFILE}}
	}
	return l.Listener.Accept()
}

// netSyscallError is os.SyscallError's shape without importing os for it: what net's accept
// returns under EMFILE.
type netSyscallError struct{ err syscall.Errno }

func (e *netSyscallError) Error() string   { return "accept4: " + e.err.Error() }
func (e *netSyscallError) Unwrap() error   { return e.err }
func (e *netSyscallError) Temporary() bool { return e.err.Temporary() }
func (e *netSyscallError) Timeout() bool   { return e.err.Timeout() }

// TestServeSurvivesEMFILE: Accept hands an out-of-descriptors error to net/http unchanged, as a
// temporary net.Error; Serve backs off and goes on serving instead of returning.
func TestServeSurvivesEMFILE(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(&emfileListener{Listener: inner, n: 3}, Config{Max: 10, PerClient: 5})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ErrorLog: log.New(io.Discard, "", 0)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + inner.Addr().String())
	if err != nil {
		t.Fatalf("GET after 3 EMFILEs: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Errorf("answer %q", b)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned: %v", err)
	default:
	}
	var ne net.Error
	_, err = New(&emfileListener{Listener: inner, n: 1}, Config{Max: 1, PerClient: 1}).Accept()
	if !errors.As(err, &ne) || !errors.Is(err, syscall.EMFILE) {
		t.Errorf("Accept under EMFILE: %v, want the listener's net.Error wrapping EMFILE", err)
	}
}

func TestClient(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"127.0.0.1:80", "127.0.0.1/32"},
		{"[::ffff:10.1.2.3]:80", "10.1.2.3/32"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[::1]:7070", "::/64"},
	} {
		ap := netip.MustParseAddrPort(c.addr)
		if got := client(net.TCPAddrFromAddrPort(ap)); got.String() != c.want {
			t.Errorf("client(%s) = %s, want %s", c.addr, got, c.want)
		}
	}
	if got := client(&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}); got.IsValid() {
		t.Errorf("a Unix socket's client: %s, want the zero prefix", got)
	}
}
