package server

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// How the server's timeouts meet the API's long-lived routes. The daemon sets ReadTimeout and
// WriteTimeout on its http.Server, so that a stranger's request must arrive, and its answer be
// taken, within them. A key holder's request may work much longer: an exec runs for minutes, a
// pull or a snapshot takes what it takes, an upload or a download moves a GiB, a followed log
// lasts as long as its sandbox. So once a request is authenticated, lift clears the write
// deadline the server set when its headers arrived, and what stays bounded is progress: the
// answer must be taken within WriteTimeout of being ready (writeDeadline; a stream: each
// piece), an upload's body must keep coming (each read within ReadTimeout). Other bodies keep
// the server's deadline for the whole request; net/http clears it once a body is read, so a
// long handler or a followed stream is not cut by it. A WebSocket is outside the server's
// deadlines once hijacked (websocket.Accept clears them); its handlers give each message
// WriteTimeout instead (websocket.Conn.SetWriteTimeout).

// downloadChunk is how much of a download must be taken within WriteTimeout: 1 MiB a minute
// by default is a floor no real client is under, and each chunk still goes by sendfile.
const downloadChunk = 1 << 20

// lift clears the write deadline the server set for r when its headers arrived, and, for a
// streamed body (an upload), replaces the deadline of the whole request by one for each read.
// Call it once r is authenticated.
func (s *Server) lift(w http.ResponseWriter, r *http.Request, streamBody bool) *http.Request {
	rc := http.NewResponseController(w)
	// Errors are ignored: a writer without deadlines (httptest's recorder) has none to lift.
	_ = rc.SetWriteDeadline(time.Time{})
	if streamBody && s.cfg.ReadTimeout > 0 && r.Body != nil && r.Body != http.NoBody {
		r.Body = &progressReader{ReadCloser: r.Body, rc: rc, timeout: s.cfg.ReadTimeout}
	}
	return r
}

// progressReader is a streamed request body: each Read must come within timeout.
type progressReader struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
}

func (b *progressReader) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	return b.ReadCloser.Read(p)
}

// writeDeadline gives the next write to w WriteTimeout to complete: an answer once it is ready,
// or the next piece of a stream.
func (s *Server) writeDeadline(w http.ResponseWriter) {
	if s.cfg.WriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	}
}

// copyOut copies src to w (a download) in chunks, each of which must be taken within
// WriteTimeout: a client that keeps reading gets a file of any size, one that stops is cut.
func (s *Server) copyOut(w http.ResponseWriter, src io.Reader) error {
	for {
		s.writeDeadline(w)
		n, err := io.CopyN(w, src, downloadChunk)
		if errors.Is(err, io.EOF) || err == nil && n < downloadChunk {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
