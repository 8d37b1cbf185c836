package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	dto "github.com/prometheus/client_model/go"
	vkerrdefs "github.com/virtual-kubelet/virtual-kubelet/errdefs"
	vkapi "github.com/virtual-kubelet/virtual-kubelet/node/api"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	utilexec "k8s.io/utils/exec"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// The kubelet API's streams (kubectl logs, exec), each reaching the Pod's sandbox through the
// manager as the tenant that owns it: the same path, checks and record as the host's own API.

// sandboxOf is the sandbox of the Pod ns/name, with a context acting as its tenant.
func (p *Provider) sandboxOf(ctx context.Context, ns, name string) (context.Context, string, error) {
	k := key(ns, name)
	p.mu.Lock()
	st, ok := p.pods[k]
	p.mu.Unlock()
	if !ok {
		return nil, "", vkerrdefs.NotFoundf("pod %s is not on node %s", k, p.node)
	}
	if st.id == "" {
		msg := "its sandbox is being made"
		if st.failed != nil {
			msg = "it never became a sandbox: " + st.failed.Error()
		}
		return nil, "", vkerrdefs.InvalidInputf("pod %s has no sandbox yet: %s", k, msg)
	}
	return p.ctxOf(ctx, st), st.id, nil
}

// GetContainerLogs returns the output of the Pod's agent (and of its execs: a sandbox has one
// log), as kubectl logs shows it; with Follow it streams until the sandbox ends.
func (p *Provider) GetContainerLogs(ctx context.Context, ns, name, _ string, opts vkapi.ContainerLogOpts) (io.ReadCloser, error) {
	tctx, id, err := p.sandboxOf(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	var since time.Time
	switch {
	case !opts.SinceTime.IsZero():
		since = opts.SinceTime
	case opts.SinceSeconds > 0:
		since = time.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second)
	}
	line := func(e api.LogEntry) []byte {
		if opts.Timestamps {
			return []byte(e.Time.Format(time.RFC3339Nano) + " " + e.Data)
		}
		return []byte(e.Data)
	}
	keep := func(e api.LogEntry) bool {
		return (e.Stream == api.StreamStdout || e.Stream == api.StreamStderr) && !e.Time.Before(since)
	}
	if !opts.Follow {
		var buf bytes.Buffer
		err := p.m.Logs(tctx, id, 0, false, func(e api.LogEntry) error {
			if keep(e) {
				buf.Write(line(e))
			}
			return nil
		})
		if err != nil {
			return nil, fromManager(err)
		}
		out := buf.Bytes()
		if opts.Tail > 0 {
			out = tail(out, opts.Tail)
		}
		if opts.LimitBytes > 0 && len(out) > opts.LimitBytes {
			out = out[:opts.LimitBytes]
		}
		return io.NopCloser(bytes.NewReader(out)), nil
	}
	pr, pw := io.Pipe()
	fctx, cancel := context.WithCancel(tctx)
	go func() {
		defer cancel()
		written := 0
		err := p.m.Logs(fctx, id, 0, true, func(e api.LogEntry) error {
			if !keep(e) {
				return nil
			}
			b := line(e)
			if opts.LimitBytes > 0 && written+len(b) > opts.LimitBytes {
				b = b[:opts.LimitBytes-written]
			}
			n, err := pw.Write(b)
			written += n
			if err == nil && opts.LimitBytes > 0 && written >= opts.LimitBytes {
				return io.EOF
			}
			return err
		})
		if errors.Is(err, io.EOF) {
			err = nil
		}
		pw.CloseWithError(err)
	}()
	return &cancelReader{ReadCloser: pr, cancel: cancel}, nil
}

type cancelReader struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (r *cancelReader) Close() error { r.cancel(); return r.ReadCloser.Close() }

// tail is the last n lines of b.
func tail(b []byte, n int) []byte {
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			if n--; n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}

// RunInContainer runs cmd in the Pod's sandbox as an exec of the sandbox's tenant, with the
// client's stdin, stdout and stderr (and its terminal, for kubectl exec -it). A command that
// exits non-zero is reported with its exit code, as a kubelet reports it.
func (p *Provider) RunInContainer(ctx context.Context, ns, name, _ string, cmd []string, attach vkapi.AttachIO) error {
	tctx, id, err := p.sandboxOf(ctx, ns, name)
	if err != nil {
		return err
	}
	if len(cmd) == 0 {
		return vkerrdefs.InvalidInput("exec: no command")
	}
	st := manager.Stream{Stdin: attach.Stdin(), TTY: attach.TTY()}
	if w := attach.Stdout(); w != nil {
		st.Stdout = w
	}
	if w := attach.Stderr(); w != nil {
		st.Stderr = w
	}
	if attach.TTY() {
		resize := make(chan sandbox.Resize, 1)
		st.Resize = resize
		go func() {
			for {
				select {
				case s, ok := <-attach.Resize():
					if !ok {
						return
					}
					select {
					case resize <- sandbox.Resize{Winsize: sandbox.Winsize{Rows: s.Height, Cols: s.Width}}:
					case <-ctx.Done():
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	noCapture := false
	res, err := p.m.Exec(tctx, id, api.ExecRequest{Command: cmd, CaptureOutput: &noCapture}, st)
	if err != nil {
		return fromManager(err)
	}
	if res.ExitCode != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", res.ExitCode), Code: res.ExitCode}
	}
	return nil
}

// AttachToContainer is not offered: a sandbox's agent is reached by its logs and its stdin
// (POST /api/v1/sandboxes/{id}/agent/stdin), not by a terminal.
func (p *Provider) AttachToContainer(ctx context.Context, ns, name, _ string, _ vkapi.AttachIO) error {
	return vkerrdefs.InvalidInputf("kubectl attach is not offered by an airlock node: use kubectl logs -f, or kubectl exec (docs/kubernetes.md)")
}

// PortForward is not offered: a sandbox's network is its policy's, not the cluster's.
func (p *Provider) PortForward(ctx context.Context, ns, name string, _ int32, _ io.ReadWriteCloser) error {
	return vkerrdefs.InvalidInputf("kubectl port-forward is not offered by an airlock node: a sandbox's ports are reached through airlock's API (docs/kubernetes.md)")
}

// GetStatsSummary reports the node and its Pods with no usage: metrics are airlock's own
// (GET /metrics on the host, GET .../metrics per sandbox).
func (p *Provider) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: p.node}}, nil
}

// GetMetricsResource reports nothing for the same reason.
func (p *Provider) GetMetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	return nil, nil
}

// fromManager maps an error of the manager to the virtual kubelet's kinds, so that its API
// answers 404 or 400 where airlock's would.
func fromManager(err error) error {
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return vkerrdefs.AsNotFound(err)
	case errors.Is(err, errdefs.ErrInvalidArgument), errors.Is(err, errdefs.ErrConflict):
		return vkerrdefs.AsInvalidInput(err)
	}
	return err
}
