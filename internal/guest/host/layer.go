package host

import (
	"context"
	"fmt"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/guest"
)

var _ driver.Layerer = (*Sandbox)(nil)

// Layer implements driver.Layerer. A layer init built lives in init's mount namespace
// (Launcher.InitLayer): the host reads it through init's clone of it (as a snapshot does), live,
// without freezing the sandbox. Otherwise the level says where its layer is (Launcher.Writable).
func (s *Sandbox) Layer(ctx context.Context) (driver.Layer, error) {
	if !s.l.InitLayer {
		if s.l.Writable == nil {
			return driver.Layer{}, fmt.Errorf("layer: this level cannot read sandbox layers: %w", errdefs.ErrUnavailable)
		}
		return *s.l.Writable, nil
	}
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if s.destroyed {
		return driver.Layer{}, fmt.Errorf("layer: sandbox %s is destroyed: %w", s.id, errdefs.ErrConflict)
	}
	if err := s.ended("layer"); err != nil {
		return driver.Layer{}, err
	}
	if err := s.holdLayer(ctx, "layer"); err != nil {
		return driver.Layer{}, err
	}
	return driver.Layer{Dir: fmt.Sprintf("/proc/self/fd/%d", s.layer.Fd()), Layout: guest.LayerLayout, Lowers: s.l.Lowers}, nil
}

// holdLayer makes s.layer init's clone of the writable layer, asking init for it the first time;
// the sandbox keeps it until Destroy. The caller holds stateMu.
func (s *Sandbox) holdLayer(ctx context.Context, what string) error {
	if s.layer != nil {
		return nil
	}
	if s.paused {
		// Init, frozen, cannot hand its layer over; one taken earlier would do.
		return fmt.Errorf("%s: sandbox %s was paused before the host first read its layer; resume it, and try again: %w", what, s.id, errdefs.ErrConflict)
	}
	f, err := s.fetchLayer(ctx)
	if err != nil {
		return err
	}
	s.layer = f
	return nil
}
