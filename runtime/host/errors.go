package host

import (
	"errors"
	"fmt"

	"github.com/wasmccm/wasmccm/abi"
)

// ErrUnsupported is returned for an export the module does not have.
var ErrUnsupported = errors.New("not supported by the module")

// StatusError is a non-OK status the module answered. The provider adapter
// maps it to the cloudprovider error the controllers expect.
type StatusError struct {
	Export string
	abi.Outcome
}

func (e *StatusError) Error() string {
	if e.Status == abi.StatusRetryAfter {
		return fmt.Sprintf("%s: %s (retry after %s)", e.Export, e.Message, e.RetryAfter)
	}
	if e.Message == "" {
		return fmt.Sprintf("%s: %s", e.Export, e.Status)
	}
	return fmt.Sprintf("%s: %s: %s", e.Export, e.Status, e.Message)
}

// ErrShadowThrottled is the error of a call of a module in shadow during
// which the rate budget refused at least one of its requests for want of
// spare room (egress.RateBudget): the host withholds whatever the module answered.
// It says nothing about the module or the cloud: a rollout leaves the call
// out of its comparison.
var ErrShadowThrottled = errors.New("the rate budget had no spare room for a request of this module in shadow; its answer is withheld")

// Failure reasons: the module gave no answer, or the host withheld it.
const (
	ReasonTrap         = "trap"
	ReasonTimeout      = "timeout"
	ReasonCanceled     = "canceled"
	ReasonABIViolation = "abi_violation"
	ReasonUnavailable  = "unavailable"
	// ReasonShadowThrottled: ErrShadowThrottled. The instance is kept
	// unless the module itself failed in that call.
	ReasonShadowThrottled = "shadow_throttled"
)

// FailureError is a call that produced no answer: the guest trapped, ran
// past its deadline, broke the ABI, or no instance could be had; or, for
// a module in shadow, the host withheld the answer (ReasonShadowThrottled).
// It is never a statement about the cloud, so callers must not read "not
// found" or "does not exist" into it.
type FailureError struct {
	Export string
	Reason string
	Err    error
}

func (e *FailureError) Error() string {
	return fmt.Sprintf("%s: module call failed (%s): %v", e.Export, e.Reason, e.Err)
}

func (e *FailureError) Unwrap() error { return e.Err }

// withheld replaces the outcome of a call of a module in shadow in which
// the budget refused a request: whatever the module answered was shaped by
// the host's refusal, not by the cloud, so it is no evidence for or
// against the module.
func withheld(export string) error {
	return &FailureError{Export: export, Reason: ReasonShadowThrottled, Err: ErrShadowThrottled}
}

// abiViolation is what a host function panics with when the guest hands it
// memory it does not own or a malformed message: the call is aborted and
// the instance replaced.
type abiViolation struct{ msg string }

func (v *abiViolation) Error() string { return "ABI violation: " + v.msg }

// errStackExhausted is what the loop check panics with when a call's
// frames pass the bound Config.StackLimitBytes sets: the call traps, and
// its instance is replaced.
var errStackExhausted = errors.New("the call's frames passed the stack limit (limits.stackLimitMiB)")
