package reportgate

import (
	"strings"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	g := New(time.Minute)
	steps := []struct {
		key   string
		at    time.Duration
		admit bool
	}{
		{"a", 0, true},                          // the first report
		{"a", 30 * time.Second, false},          // within the interval
		{"b", 30 * time.Second, true},           // keys are apart
		{"a", time.Minute, true},                // the interval has passed
		{"a", time.Minute + time.Second, false}, // counted from the last admitted
		{"b", time.Minute, false},
		{"b", 90 * time.Second, true},
		{"forget b", 91 * time.Second, false},
		{"b", 92 * time.Second, true}, // forgotten: a first report again
	}
	for i, s := range steps {
		if key, ok := strings.CutPrefix(s.key, "forget "); ok {
			g.Forget(key)
			continue
		}
		if got := g.Admit(s.key, t0.Add(s.at)); got != s.admit {
			t.Errorf("step %d: Admit(%q, +%v) = %v, want %v", i, s.key, s.at, got, s.admit)
		}
	}
}
