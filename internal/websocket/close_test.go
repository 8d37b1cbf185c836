package websocket

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestCloseHandshake(t *testing.T) {
	tests := []struct {
		name             string
		serverInitiates  bool
		concurrentReader bool // the initiator has a ReadMessage running during Close
		code             int
		reason           string
	}{
		{"client closes", false, false, CloseNormal, "bye"},
		{"server closes", true, false, 4001, "done"},
		{"client closes while reading", false, true, CloseGoingAway, ""},
		{"server closes while reading", true, true, CloseInternalError, "oops"},
	}
	// side plays one end: the initiator calls Close, the other end reads.
	type result struct {
		closeErr, readErr error
		took              time.Duration
	}
	side := func(c *Conn, initiate, concurrent bool, code int, reason string) result {
		var r result
		if !initiate {
			for r.readErr == nil {
				_, _, r.readErr = c.ReadMessage()
			}
			return r
		}
		done := make(chan struct{})
		if concurrent {
			go func() {
				defer close(done)
				_, _, r.readErr = c.ReadMessage()
			}()
			time.Sleep(10 * time.Millisecond) // let the reader block first
		} else {
			close(done)
		}
		start := time.Now()
		r.closeErr = c.Close(code, reason)
		r.took = time.Since(start)
		<-done
		return r
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resc := make(chan result, 1)
			url := startServer(t, func(c *Conn) {
				resc <- side(c, tt.serverInitiates, tt.concurrentReader, tt.code, tt.reason)
			})
			c := dial(t, url)
			client := side(c, !tt.serverInitiates, tt.concurrentReader, tt.code, tt.reason)
			server := <-resc
			initiator, peer := client, server
			if tt.serverInitiates {
				initiator, peer = server, client
			}
			checkErr(t, peer.readErr, &CloseError{Code: tt.code, Reason: tt.reason})
			if initiator.closeErr != nil {
				t.Errorf("Close: %v", initiator.closeErr)
			}
			if initiator.took >= closeTimeout {
				t.Errorf("Close took %v; it should not wait for the timeout", initiator.took)
			}
			if tt.concurrentReader {
				// The reader sees the peer's echo of our code.
				checkErr(t, initiator.readErr, &CloseError{Code: tt.code})
			}
			if err := c.WriteMessage(Text, []byte("late")); !errors.Is(err, ErrClosed) {
				t.Errorf("WriteMessage after close = %v, want ErrClosed", err)
			}
			if _, _, err := c.ReadMessage(); err == nil {
				t.Error("ReadMessage after close succeeded")
			}
		})
	}
}

func TestCloseSilentPeer(t *testing.T) {
	got := make(chan wantFrame, 1)
	url := startRawServer(t, func(p *rawPeer) {
		// Read the client's close but never answer it.
		p.expect([]wantFrame{{op: 0x8, code: CloseNormal}})
		_, _ = io.Copy(io.Discard, p.br)
		got <- wantFrame{}
	})
	c := dial(t, url)
	start := time.Now()
	if err := c.Close(CloseNormal, ""); err != nil {
		t.Errorf("Close: %v", err)
	}
	if took := time.Since(start); took < closeTimeout/2 || took > 3*closeTimeout {
		t.Errorf("Close took %v, want about %v", took, closeTimeout)
	}
	<-got
}

func TestCloseArguments(t *testing.T) {
	tests := []struct {
		name   string
		code   int
		reason string
	}{
		{"reserved code 1005", CloseNoStatus, ""},
		{"code below 1000", 999, ""},
		{"reason too long", CloseNormal, strings.Repeat("r", maxCloseReason+1)},
		{"reason not UTF-8", CloseNormal, "\xff"},
	}
	url := startServer(t, func(c *Conn) { _ = echo(c) })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, url)
			if err := c.Close(tt.code, tt.reason); err == nil {
				t.Error("Close succeeded, want an error")
			}
			// The connection is closed anyway.
			if err := c.WriteMessage(Text, nil); err == nil {
				t.Error("WriteMessage after a failed Close succeeded")
			}
		})
	}
}
