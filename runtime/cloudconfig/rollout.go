package cloudconfig

import (
	"errors"
	"time"
)

// Defaults of module.rollout.
const (
	defaultShadowDuration      = 2 * time.Minute
	defaultShadowCalls         = 20
	defaultShadowConcurrency   = 4
	defaultRollbackWindow      = 30 * time.Minute
	defaultRollbackMinCalls    = 20
	defaultRollbackFailPercent = 20
)

// Rollout is module.rollout, carried out by runtime/lifecycle.
type Rollout struct {
	// Shadow compares a changed module's answers with the module in
	// service before it answers.
	Shadow Shadow `json:"shadow,omitempty"`
	// Rollback keeps the previous module after a promotion, to put it
	// back if the new one fails.
	Rollback Rollback `json:"rollback,omitempty"`
}

// Shadow is module.rollout.shadow. A candidate is promoted once it
// has run in shadow for Duration (default 2m) and been compared on at
// least Calls calls (default 20), with at most Concurrency (default 4)
// shadow calls in flight; shadow calls beyond that are dropped and
// counted, never queued. A shadow call in which the rate budget had no
// spare room for one of the candidate's requests (host.ErrShadowThrottled)
// is not compared either, only counted: with a budget the module in
// service keeps full (a burst of 1), the candidate waits in shadow.
// Disabled puts a new module in service at once, as plain hot reload does:
// it is unsafe, since nothing then checks the new module's answers before
// the controllers act on them (the deletion budget still applies).
type Shadow struct {
	// Disabled puts a changed module in service at once (unsafe).
	Disabled bool `json:"disabled,omitempty"`
	// Duration is the least time a candidate runs in shadow.
	Duration Duration `json:"duration,omitempty"`
	// Calls is the least number of calls compared before a promotion.
	Calls int `json:"calls,omitempty"`
	// Concurrency bounds the shadow calls in flight; more are dropped.
	Concurrency int `json:"concurrency,omitempty"`
}

// Rollback is module.rollout.rollback. For Window (default 30m)
// after a promotion the previous module stays compiled; if at least
// MinCalls (default 20) calls reached the promoted module and
// FailurePercent (default 20) percent or more of them failed without an
// answer, the previous module is put back. Disabled drops the previous
// module at promotion.
type Rollback struct {
	// Disabled drops the previous module at promotion.
	Disabled bool `json:"disabled,omitempty"`
	// Window is how long after a promotion the previous module is kept.
	Window Duration `json:"window,omitempty"`
	// MinCalls is the least number of calls before a rollback is judged.
	MinCalls int `json:"minCalls,omitempty"`
	// FailurePercent of calls failing without an answer rolls back.
	FailurePercent int `json:"failurePercent,omitempty"`
}

// Validate reports every value out of range, named by its cloud-config
// path.
func (c Rollout) Validate() error {
	var errs []error
	if c.Shadow.Duration.Duration < 0 || c.Rollback.Window.Duration < 0 {
		errs = append(errs, errors.New("module.rollout durations must not be negative"))
	}
	if c.Shadow.Calls < 0 || c.Shadow.Concurrency < 0 || c.Shadow.Concurrency > 64 {
		errs = append(errs, errors.New("module.rollout.shadow: calls must not be negative and concurrency must be in 0..64"))
	}
	if c.Rollback.MinCalls < 0 || c.Rollback.FailurePercent < 0 || c.Rollback.FailurePercent > 100 {
		errs = append(errs, errors.New("module.rollout.rollback: minCalls must not be negative and failurePercent must be in 0..100"))
	}
	return errors.Join(errs...)
}

// WithDefaults returns c with its unset values at their defaults.
func (c Shadow) WithDefaults() Shadow {
	c.Duration.Duration = orDefault(c.Duration.Duration, defaultShadowDuration)
	c.Calls = orDefault(c.Calls, defaultShadowCalls)
	c.Concurrency = orDefault(c.Concurrency, defaultShadowConcurrency)
	return c
}

// WithDefaults returns c with its unset values at their defaults.
func (c Rollback) WithDefaults() Rollback {
	c.Window.Duration = orDefault(c.Window.Duration, defaultRollbackWindow)
	c.MinCalls = orDefault(c.MinCalls, defaultRollbackMinCalls)
	c.FailurePercent = orDefault(c.FailurePercent, defaultRollbackFailPercent)
	return c
}
