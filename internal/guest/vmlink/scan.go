package vmlink

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/airlockrun/airlock/internal/fsdiff"
)

// LayerScan is the call that scans the writable layer inside the guest, where its disk is
// mounted (fsdiff.Scan, laid out as guest.LayerLayout): the agent answers with the tree's wire
// form (fsdiff.WriteTree) as a stream, which the host reads with fsdiff.ReadTree's bounds.
const LayerScan = "layer.scan"

// ScanLayer asks the guest agent for a scan of the writable layer. The guest is not trusted: a
// stream that is not a scan's tree, or longer than fsdiff.MaxTreeBytes, is refused
// (fsdiff.ErrBadTree), and the agent's stream stopped.
func (h *Host) ScanLayer(ctx context.Context) (fsdiff.Tree, error) {
	pr, pw := io.Pipe()
	called := make(chan error, 1)
	go func() {
		err := h.CallStream(ctx, LayerScan, pw)
		pw.CloseWithError(err) // nil: EOF, the tree's end
		called <- err
	}()
	t, err := fsdiff.ReadTree(pr)
	// A tree refused stops the stream: what the agent still writes is dropped.
	pr.CloseWithError(errors.New("refused"))
	cerr := <-called
	switch {
	case err != nil && !errors.Is(err, fsdiff.ErrBadTree) && cerr != nil:
		return fsdiff.Tree{}, fmt.Errorf("the guest's scan of its layer: %w", cerr)
	case err != nil:
		return fsdiff.Tree{}, fmt.Errorf("the guest's scan of its layer: %w", err)
	}
	return t, nil
}
