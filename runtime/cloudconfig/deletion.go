package cloudconfig

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of safety.maxNodeDeletions. One Node, or 1% of the cluster, per
// ten minutes: a 3-node cluster loses at most one Node per ten minutes to
// answers alone (it keeps a majority), a 5,000-node cluster at most 50,
// where a bad release would otherwise delete every NotReady Node within
// seconds. The window is long enough for the NodeDeletionDeferred Events
// and the metric to page someone before the next batch. Corroborated
// answers may fill half the cluster's Nodes per window (runtime/deletion's
// corroborate.go says why).
const (
	defaultDeletionCount       = 1
	defaultDeletionPercent     = 1
	defaultDeletionWindow      = 10 * time.Minute
	defaultCorroboratedPercent = 50
)

// DeletionBudget is safety.maxNodeDeletions, enforced by runtime/deletion:
// at most max(Count, Percent% of the Nodes) distinct Nodes may be answered
// "gone" per Window. Unset fields take the defaults (1, 1%, 10m). Count
// and Percent both 0 defer every deletion; Disabled turns the guard off
// and must be written out, because it lets a faulty module delete every
// NotReady Node at once.
type DeletionBudget struct {
	// Disabled turns the guard off (unsafe).
	Disabled bool `json:"disabled,omitempty"`
	// Count is the least number of Nodes admitted per window.
	Count *int `json:"count,omitempty"`
	// Percent of the cluster's Nodes admitted per window, when more than
	// Count.
	Percent *int `json:"percent,omitempty"`
	// Window is the sliding window the admissions are counted in.
	Window Duration `json:"window,omitempty"`
	// Corroborated admits more, up to its Percent, when other evidence
	// agrees with the module.
	Corroborated Corroboration `json:"corroborated,omitempty"`
}

// Corroboration is safety.maxNodeDeletions.corroborated: "gone" answers
// past the budget that the control probe and, during probation, the
// previous module corroborate are admitted up to Percent (default 50) of
// the Nodes per window. Disabled holds every answer to the budget.
type Corroboration struct {
	// Disabled holds every answer to the budget.
	Disabled bool `json:"disabled,omitempty"`
	// Percent of the Nodes is the most admitted per window, corroborated
	// answers included.
	Percent *int `json:"percent,omitempty"`
}

// WithDefaults returns b with its unset values at their defaults (the
// corroborated percentage only while corroboration is on).
func (b DeletionBudget) WithDefaults() DeletionBudget {
	if b.Count == nil {
		b.Count = intPointer(defaultDeletionCount)
	}
	if b.Percent == nil {
		b.Percent = intPointer(defaultDeletionPercent)
	}
	b.Window.Duration = orDefault(b.Window.Duration, defaultDeletionWindow)
	if !b.Corroborated.Disabled && b.Corroborated.Percent == nil {
		b.Corroborated.Percent = intPointer(defaultCorroboratedPercent)
	}
	return b
}

func intPointer(v int) *int { return &v }

// Validate reports every value out of range, named by its cloud-config
// path.
func (b DeletionBudget) Validate() error {
	var errs []error
	if b.Count != nil && *b.Count < 0 {
		errs = append(errs, fmt.Errorf("safety.maxNodeDeletions.count %d is negative", *b.Count))
	}
	if b.Percent != nil && (*b.Percent < 0 || *b.Percent > 100) {
		errs = append(errs, fmt.Errorf("safety.maxNodeDeletions.percent %d is outside 0..100", *b.Percent))
	}
	if p := b.Corroborated.Percent; p != nil && (*p < 0 || *p > 100) {
		errs = append(errs, fmt.Errorf("safety.maxNodeDeletions.corroborated.percent %d is outside 0..100", *p))
	}
	if b.Window.Duration < 0 {
		errs = append(errs, errors.New("safety.maxNodeDeletions.window must not be negative"))
	}
	return errors.Join(errs...)
}
