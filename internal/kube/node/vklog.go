package node

import (
	"context"
	"fmt"
	"log/slog"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
)

// withLogger gives the virtual kubelet's code, which logs through its own interface found in
// the context, the daemon's logger.
func withLogger(ctx context.Context, log *slog.Logger) context.Context {
	return vklog.WithLogger(ctx, vkLogger{log.With("component", "virtual-kubelet")})
}

// vkLogger is the virtual kubelet's Logger over slog. Its debug and info lines are the
// library's chatter (each pod sync): they go out at debug. Fatal logs as an error and does not
// exit: the library never calls it, and a daemon's end is the daemon's to decide.
type vkLogger struct{ l *slog.Logger }

var _ vklog.Logger = vkLogger{}

func (v vkLogger) Debug(a ...any)                         { v.l.Debug(fmt.Sprint(a...)) }
func (v vkLogger) Debugf(f string, a ...any)              { v.l.Debug(fmt.Sprintf(f, a...)) }
func (v vkLogger) Info(a ...any)                          { v.l.Debug(fmt.Sprint(a...)) }
func (v vkLogger) Infof(f string, a ...any)               { v.l.Debug(fmt.Sprintf(f, a...)) }
func (v vkLogger) Warn(a ...any)                          { v.l.Warn(fmt.Sprint(a...)) }
func (v vkLogger) Warnf(f string, a ...any)               { v.l.Warn(fmt.Sprintf(f, a...)) }
func (v vkLogger) Error(a ...any)                         { v.l.Error(fmt.Sprint(a...)) }
func (v vkLogger) Errorf(f string, a ...any)              { v.l.Error(fmt.Sprintf(f, a...)) }
func (v vkLogger) Fatal(a ...any)                         { v.l.Error(fmt.Sprint(a...)) }
func (v vkLogger) Fatalf(f string, a ...any)              { v.l.Error(fmt.Sprintf(f, a...)) }
func (v vkLogger) WithField(k string, a any) vklog.Logger { return vkLogger{v.l.With(k, a)} }
func (v vkLogger) WithError(err error) vklog.Logger       { return vkLogger{v.l.With("err", err)} }
func (v vkLogger) WithFields(f vklog.Fields) vklog.Logger {
	l := v.l
	for k, a := range f {
		l = l.With(k, a)
	}
	return vkLogger{l}
}
