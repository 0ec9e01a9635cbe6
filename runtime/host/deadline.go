package host

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// abortMargin bounds how long guest code runs on once its context has
// ended (its deadline passed, its caller gave up, or Close aborted it).
// The guest's loops check for the end (checkDeadline) once per
// loopcheck.Budget, and the host's blocking functions wait on it: WASI
// sleeps (sleeper), HTTP requests and their rate budget, shared state
// claims, and OAuth2 token exchanges (which run on their own deadline but
// are waited for only until the call's ends). What remains is scheduling,
// so the margin is generous.
const abortMargin = 250 * time.Millisecond

// errAborted ends the guest code still running when Close stops waiting
// for it. It wraps ErrClosed: the caller retries on the module that
// replaced this one.
var errAborted = fmt.Errorf("%w: the call was aborted when Close stopped waiting for it", ErrClosed)

// guestContext is the context of one entry into the guest (start
// functions, the ABI version, init, an export), which its WASI sleeps and
// host functions share. It ends with ctx, after CallTimeout (its cause
// then says so), or when Close aborts the module's remaining guest code
// (stopCause).
func (m *Module) guestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeoutCause(ctx, m.cfg.CallTimeout, m.timedOut)
	stop := context.AfterFunc(m.alive, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// stopCause says why the guest code running under ctx, a guestContext
// that ended, was stopped.
func (m *Module) stopCause(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.Canceled) && m.alive.Err() != nil {
		return errAborted
	}
	return context.Cause(ctx)
}

// sleeper is an instance's WASI sleep (poll_oneoff with a clock
// subscription), which wazero's Nanosleep gives no context. An instance
// serves one entry into the guest at a time, and each entry points done at
// its context, so a sleep ends with the entry; the loop check
// (checkDeadline, or wazero's for a module without it) then stops the
// guest.
type sleeper struct{ done <-chan struct{} }

func (s *sleeper) sleep(ns int64) {
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.done:
	}
}
