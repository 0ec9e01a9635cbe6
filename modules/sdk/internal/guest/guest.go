// Package guest holds the SDK's side of the calling convention: the reused
// input and output buffers and the dispatch of one method call. The export
// wrappers (build-tagged for wasip1) are thin shells over Dispatch so that
// everything here is testable with plain `go test`.
package guest

import (
	"context"
	"errors"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// A call's input and output live in two buffers that grow to the largest
// message seen and are then reused: one call runs per instance at a time, so
// reuse is safe, and it keeps steady-state calls free of allocation here.
var (
	input  []byte
	output []byte
)

// Input returns a buffer of exactly size bytes for the host to fill.
func Input(size uint32) []byte {
	if uint32(cap(input)) < size {
		input = make([]byte, size)
	}
	return input[:size]
}

// Errors a provider returns to choose a status other than StatusError. The
// SDK re-exports them; they live here so Dispatch can map them.
var (
	ErrNotFound             = errors.New("not found")
	ErrNotImplemented       = errors.New("not implemented")
	ErrImplementedElsewhere = errors.New("implemented elsewhere")
)

// RetryError asks the controller to retry after a delay.
type RetryError struct {
	After time.Duration
	Msg   string
}

func (e *RetryError) Error() string { return e.Msg }

// deadline is when the call about to run must have its answer, by the
// guest's clock: the time left that the host passed to SetDeadline,
// counted from when it did, less answerReserve. Zero when the host did
// not (an older host): the call has no known deadline. It is reset when
// the call ends so that no call sees another's.
var deadline time.Time

// SetDeadline is the body of abi.ExportSetDeadline, which the host calls
// right before each method export.
func SetDeadline(left time.Duration) { deadline = time.Now().Add(left - answerReserve(left)) }

// answerReserve is the part of a call's time its context keeps back for
// the answer: a tenth, a second at most. The host stops a call at its
// deadline, and a call stopped there answers nothing, not even the
// RetryAfter or the error of a provider that waited on the cloud until
// its context ended.
func answerReserve(left time.Duration) time.Duration { return min(left/10, time.Second) }

// call is the context of the call in progress, made on the first Context
// of the call and ended by Dispatch: one call runs per instance at a time.
var call struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// Context is the context handed to provider methods inside a module. Its
// deadline is the call's, less a reserve for the answer (answerReserve):
// the host stops the instance at the call's, so a provider polling an
// asynchronous cloud action polls while its context lasts, then answers
// RetryAfter in time. It is Background when the host set no
// deadline (an older host, or outside a module).
func Context() context.Context {
	if call.ctx == nil {
		call.ctx, call.cancel = context.Background(), func() {}
		if !deadline.IsZero() {
			call.ctx, call.cancel = withDeadline(deadline)
		}
	}
	return call.ctx
}

// endCall forgets the call's deadline and ends its context.
func endCall() {
	if call.cancel != nil {
		call.cancel()
	}
	call.ctx, call.cancel = nil, nil
	deadline = time.Time{}
}

// Dispatch decodes in into req, runs fn, and encodes its outcome and payload
// into the reused output buffer. A malformed input is reported as
// StatusError without running fn: the host never sends one, so it signals a
// host/guest ABI mismatch worth a clear message rather than a trap.
func Dispatch(in []byte, req abi.Message, fn func() (abi.Message, error)) []byte {
	defer endCall()
	if fn == nil {
		return encode(abi.Outcome{Status: abi.StatusError, Message: "guest: no implementation registered for this export"}, nil)
	}
	if req != nil {
		if err := unmarshal(in, req); err != nil {
			return encode(abi.Outcome{Status: abi.StatusError, Message: "guest: decoding request: " + err.Error()}, nil)
		}
	}
	payload, err := fn()
	return encode(OutcomeOf(err), payload)
}

func encode(o abi.Outcome, payload abi.Message) []byte {
	output = abi.EncodeResult(output, o, payload)
	return output
}

// OutcomeOf maps a provider error to the ABI status that carries it.
func OutcomeOf(err error) abi.Outcome {
	if err == nil {
		return abi.Outcome{Status: abi.StatusOK}
	}
	o := abi.Outcome{Status: abi.StatusError, Message: err.Error()}
	var retry *RetryError
	switch {
	case errors.As(err, &retry):
		o.Status, o.RetryAfter = abi.StatusRetryAfter, retry.After
	case errors.Is(err, ErrNotFound):
		o.Status = abi.StatusNotFound
	case errors.Is(err, ErrNotImplemented):
		o.Status = abi.StatusNotImplemented
	case errors.Is(err, ErrImplementedElsewhere):
		o.Status = abi.StatusImplementedElsewhere
	}
	return o
}

// Handle is the body of a typical method export: it decodes a Req, runs
// method on it, and encodes the Resp it answers. registered is false when
// the capability's package is linked but its Set was never called.
func Handle[Req, Resp any, PReq interface {
	*Req
	abi.Message
}, PResp interface {
	*Resp
	abi.Message
}](in []byte, registered bool, method func(*Req) (Resp, error)) []byte {
	var req Req
	var fn func() (abi.Message, error)
	if registered {
		fn = func() (abi.Message, error) {
			resp, err := method(&req)
			return PResp(&resp), err
		}
	}
	return Dispatch(in, PReq(&req), fn)
}
