package window

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

// start is the tests' first instant.
var start = time.Unix(1_800_000_000, 0)

func TestLimit(t *testing.T) {
	cases := []struct {
		name   string
		limits Limits
		nodes  int
		want   int
	}{
		{"count wins", Limits{Count: 5, Percent: 10}, 30, 5},
		{"percent wins", Limits{Count: 5, Percent: 10}, 80, 8},
		{"percent rounds down", Limits{Count: 0, Percent: 1}, 199, 1},
		{"zero defers everything", Limits{}, 1000, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := New(tc.limits).Limit(tc.nodes); got != tc.want {
				t.Fatalf("limit = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestDeletionBudgetWindow walks one scenario step by step: distinct Nodes
// are counted once, an admitted Node stays admitted, a deferred Node is
// reported once per window, and deferred Nodes pass as the window slides.
func TestDeletionBudgetWindow(t *testing.T) {
	w, now := New(Limits{Count: 2, Length: 10 * time.Minute}), start
	steps := []struct {
		after        time.Duration
		node         string
		admit, fresh bool
		report       bool
	}{
		{0, "a", true, true, false},
		{5 * time.Second, "a", true, false, false}, // asked again: no second unit
		{5 * time.Second, "b", true, true, false},
		{5 * time.Second, "c", false, false, true},  // over budget, reported
		{5 * time.Second, "c", false, false, false}, // reported once per window
		{5 * time.Second, "a", true, false, false},  // still admitted
		{5 * time.Second, "d", false, false, true},
		{10*time.Minute - 25*time.Second, "c", true, true, false}, // a's unit freed
		{0, "d", false, false, false},
		{5 * time.Second, "d", true, true, false}, // b's unit freed
		{0, "e", false, false, true},
	}
	for i, s := range steps {
		now = now.Add(s.after)
		d := w.Admit(s.node, 100, now)
		if d.Admitted != s.admit || d.Fresh != s.fresh || d.Report != s.report {
			t.Fatalf("step %d (%s): %+v, want admitted=%v fresh=%v report=%v", i, s.node, d, s.admit, s.fresh, s.report)
		}
	}
}

// budgetStep is one "gone" answer about node, after advance.
type budgetStep struct {
	advance time.Duration
	node    string
}

const propertyWindow = time.Minute

// checkBudget replays steps through a window of limit Nodes per
// propertyWindow and fails if any window holds more distinct admitted
// Nodes than limit, or if a Node admitted is refused within its window.
func checkBudget(t testing.TB, limit, nodes int, steps []budgetStep) {
	w, now := New(Limits{Count: limit, Length: propertyWindow}), start
	var admissions []time.Time // when a Node was freshly admitted
	lastAdmitted := map[string]time.Time{}
	for _, s := range steps {
		now = now.Add(s.advance)
		d := w.Admit(s.node, nodes, now)
		if at, ok := lastAdmitted[s.node]; ok && now.Sub(at) < propertyWindow && !d.Admitted {
			t.Fatalf("%s admitted at %v was refused %v later", s.node, at, now.Sub(at))
		}
		if d.Fresh {
			admissions = append(admissions, now)
			lastAdmitted[s.node] = now
		}
	}
	for i, start := range admissions {
		n := 0
		for _, at := range admissions[i:] {
			if at.Sub(start) < propertyWindow {
				n++
			}
		}
		if n > limit {
			t.Fatalf("%d Nodes admitted within %s from %v; limit %d", n, propertyWindow, start, limit)
		}
	}
}

// TestDeletionBudgetProperty: whatever sequence of "gone" answers the
// module gives, about whichever Nodes and at whatever times, no window of
// the configured length contains more distinct admitted Nodes than the
// limit, and a Node admitted stays admitted for its window.
func TestDeletionBudgetProperty(t *testing.T) {
	for seed := int64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewSource(seed))
		limit, nodes := rng.Intn(4), 1+rng.Intn(30)
		steps := make([]budgetStep, 400)
		for i := range steps {
			steps[i] = budgetStep{time.Duration(rng.Int63n(int64(propertyWindow / 4))), fmt.Sprintf("node-%d", rng.Intn(nodes))}
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkBudget(t, limit, nodes, steps) })
	}
}

// FuzzDeletionBudget is the same property over sequences the fuzzer
// chooses: the first byte is the limit, then each pair of bytes is a time
// step (in 64ths of the window) and a Node.
func FuzzDeletionBudget(f *testing.F) {
	f.Add([]byte{2, 0, 1, 0, 2, 0, 3, 70, 1, 0, 4})
	f.Add([]byte{0, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		limit := int(data[0] % 5)
		var steps []budgetStep
		for i := 1; i+1 < len(data); i += 2 {
			steps = append(steps, budgetStep{time.Duration(data[i]) * propertyWindow / 64, fmt.Sprintf("node-%d", data[i+1]%16)})
		}
		checkBudget(t, limit, 16, steps)
	})
}
