// Package reportgate spaces out reports of a recurring condition: a
// module retrying a broken credential in every call, an origin throttled
// for minutes, a Node refused deletion at every sync. Each must be logged
// and recorded as an Event when it starts, and again now and then while it
// lasts, but never once per occurrence, which would flood the log and the
// API server.
package reportgate

import (
	"sync"
	"time"
)

// Gate admits the first report of each key, then at most one per
// interval. The zero Gate is not usable; make one with New. It is safe
// for concurrent use.
type Gate struct {
	interval time.Duration
	mu       sync.Mutex
	last     map[string]time.Time
}

// New makes a Gate that admits one report per key per interval.
func New(interval time.Duration) *Gate {
	return &Gate{interval: interval, last: map[string]time.Time{}}
}

// Admit reports whether a report of key at now should be made, and if so
// counts it as made.
func (g *Gate) Admit(key string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if last, ok := g.last[key]; ok && now.Sub(last) < g.interval {
		return false
	}
	g.last[key] = now
	return true
}

// Forget drops key, whose condition ended: its next report is a first one.
func (g *Gate) Forget(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.last, key)
}
