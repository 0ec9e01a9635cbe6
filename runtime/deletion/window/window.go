// Package window is the arithmetic of the deletion budget: a sliding
// window of the distinct Nodes admitted for deletion, whose limit and
// ceiling scale with the cluster. It decides; package deletion reads the
// cloud-config, logs, counts and words the Events.
//
// It imports only the standard library (and a report gate that does too):
// `go test -fuzz` instruments every package a fuzz target links, so the
// budget's property is fuzzed here rather than beside Kubernetes' types.
package window

import (
	"sync"
	"time"

	"github.com/wasmccm/wasmccm/runtime/internal/reportgate"
)

// Limits are a window's length and how many Nodes it admits.
type Limits struct {
	// Count is the least number of Nodes admitted per window.
	Count int
	// Percent of the cluster's Nodes admitted per window, when more than
	// Count.
	Percent int
	// CeilingPercent of the Nodes caps the admissions, corroborated ones
	// included; 0 when corroboration is off.
	CeilingPercent int
	// Length is how long an admission counts.
	Length time.Duration
}

// Window is the sliding-window count of distinct Nodes admitted for
// deletion. It is safe for concurrent use.
type Window struct {
	limits Limits

	mu sync.Mutex
	// admitted holds when each Node still in the window was admitted.
	admitted map[string]time.Time
	// deferred spaces the reports of each Node refused, so that a Node
	// asked about every few seconds makes one Event per window, not one
	// per answer.
	deferred *reportgate.Gate
}

// New returns an empty window with limits.
func New(limits Limits) *Window {
	return &Window{limits: limits, admitted: map[string]time.Time{}, deferred: reportgate.New(limits.Length)}
}

// Length is how long an admission counts.
func (w *Window) Length() time.Duration { return w.limits.Length }

// Limit is max(Count, Percent% of nodes), rounding the percentage down:
// at 150 Nodes, 1% allows one Node, not two. nodes is 0 until the Node
// cache has synced, so that only the absolute count applies until the
// percentage can be computed on the whole cluster.
func (w *Window) Limit(nodes int) int {
	limit, _ := w.bounds(nodes)
	return limit
}

// bounds returns the limit and the ceiling that corroborated admissions
// may fill the window up to (never less than the limit).
func (w *Window) bounds(nodes int) (limit, ceiling int) {
	limit = max(w.limits.Count, nodes*w.limits.Percent/100)
	return limit, max(limit, nodes*w.limits.CeilingPercent/100)
}

// Decision is what the window says about one "gone" answer.
type Decision struct {
	Admitted bool
	// Fresh is set when this answer admitted the Node, not an earlier one.
	Fresh bool
	// Corroborable is set on a refusal that corroborated evidence may
	// still turn into an admission: the limit is reached, the ceiling is
	// not.
	Corroborable bool
	// Report is set on the first refusal of a Node in a window.
	Report bool
	// Used, Limit and Ceiling describe the window at the time of the
	// decision.
	Used, Limit, Ceiling int
}

// Admit decides whether the deletion of node, in a cluster of nodes
// Nodes, may proceed at now on the module's word alone.
func (w *Window) Admit(node string, nodes int, now time.Time) Decision {
	return w.decide(node, nodes, now, false)
}

// AdmitCorroborated decides again once the answer has been corroborated:
// the ceiling applies instead of the limit.
func (w *Window) AdmitCorroborated(node string, nodes int, now time.Time) Decision {
	return w.decide(node, nodes, now, true)
}

func (w *Window) decide(node string, nodes int, now time.Time, corroborated bool) Decision {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, at := range w.admitted {
		if now.Sub(at) >= w.limits.Length {
			delete(w.admitted, name)
		}
	}
	d := Decision{Used: len(w.admitted)}
	d.Limit, d.Ceiling = w.bounds(nodes)
	switch _, ok := w.admitted[node]; {
	case ok:
		d.Admitted = true
	case d.Used < d.Limit || corroborated && d.Used < d.Ceiling:
		w.admitted[node] = now
		w.deferred.Forget(node)
		d.Admitted, d.Fresh, d.Used = true, true, d.Used+1
	case !corroborated && d.Used < d.Ceiling:
		d.Corroborable = true
	default:
		d.Report = w.deferred.Admit(node, now)
	}
	return d
}

// Refuse records the refusal of an answer that found no corroboration.
func (w *Window) Refuse(node string, nodes int, now time.Time) Decision {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := Decision{Used: len(w.admitted), Report: w.deferred.Admit(node, now)}
	d.Limit, d.Ceiling = w.bounds(nodes)
	return d
}
