package cloudconfig

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of orphanSweep, and of clusterName, which names the cluster's
// load balancers to the sweep.
const (
	defaultSweepPeriod              = 10 * time.Minute
	defaultSweepMaxDeletionsPerHour = 5
	// DefaultClusterName is cloud-provider's default --cluster-name.
	DefaultClusterName = "kubernetes"
	// minSweepPeriod keeps a typo from listing the cloud in a tight loop;
	// periods this short are for tests.
	minSweepPeriod = time.Second
)

// OrphanSweep is orphanSweep, carried out by runtime/sweep.
type OrphanSweep struct {
	// Disabled turns the sweep off.
	Disabled bool `json:"disabled,omitempty"`
	// Period between sweeps (default 10m, at least 1s). An orphan is
	// deleted at the second sweep that finds it, so between one and two
	// periods after it appeared.
	Period Duration `json:"period,omitempty"`
	// MaxDeletionsPerHour bounds the load balancers deleted in any hour
	// (default 5).
	MaxDeletionsPerHour int `json:"maxDeletionsPerHour,omitempty"`
	// DryRun reports orphans (log, metric, Event) without deleting them.
	DryRun bool `json:"dryRun,omitempty"`
	// AllowDefaultClusterName lets the sweep run under the cluster name
	// "kubernetes": set it only when no other cluster in the cloud account
	// runs a CCM that labels its load balancers with that name.
	AllowDefaultClusterName bool `json:"allowDefaultClusterName,omitempty"`
}

// Validate checks the values.
func (c OrphanSweep) Validate() error {
	var errs []error
	if c.Period.Duration != 0 && c.Period.Duration < minSweepPeriod {
		errs = append(errs, fmt.Errorf("orphanSweep.period %s is shorter than %s", c.Period.Duration, minSweepPeriod))
	}
	if c.MaxDeletionsPerHour < 0 {
		errs = append(errs, fmt.Errorf("orphanSweep.maxDeletionsPerHour %d is negative", c.MaxDeletionsPerHour))
	}
	return errors.Join(errs...)
}

// WithDefaults returns c with its unset values at their defaults.
func (c OrphanSweep) WithDefaults() OrphanSweep {
	c.Period.Duration = orDefault(c.Period.Duration, defaultSweepPeriod)
	c.MaxDeletionsPerHour = orDefault(c.MaxDeletionsPerHour, defaultSweepMaxDeletionsPerHour)
	return c
}
