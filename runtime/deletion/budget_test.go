package deletion

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func intp(v int) *int { return &v }

// fakeClock is a settable clock for the budget.
type fakeClock struct{ now time.Time }

func (f *fakeClock) advance(d time.Duration) { f.now = f.now.Add(d) }

// testBudget returns the budget cfg asks for, without corroboration
// unless cfg sets it: these tests are about the budget's own arithmetic
// (corroborate_test.go is about the rest).
func testBudget(cfg BudgetConfig) (*Budget, *fakeClock) {
	if cfg.Corroborated == (CorroborationConfig{}) {
		cfg.Corroborated.Disabled = true
	}
	return NewBudget("test", cfg), &fakeClock{now: time.Unix(1_800_000_000, 0)}
}

func TestDeletionBudgetLimit(t *testing.T) {
	cases := []struct {
		name  string
		cfg   BudgetConfig
		nodes int
		want  int
	}{
		{"defaults, 3 nodes", BudgetConfig{}, 3, 1},
		{"defaults, 199 nodes", BudgetConfig{}, 199, 1},
		{"defaults, 1000 nodes", BudgetConfig{}, 1000, 10},
		{"defaults, 5000 nodes", BudgetConfig{}, 5000, 50},
		{"defaults before the Node cache synced", BudgetConfig{}, 0, 1},
		{"count wins", BudgetConfig{Count: intp(5), Percent: intp(10)}, 30, 5},
		{"percent wins", BudgetConfig{Count: intp(5), Percent: intp(10)}, 80, 8},
		{"explicit zero defers everything", BudgetConfig{Count: intp(0), Percent: intp(0)}, 1000, 0},
		{"percent only", BudgetConfig{Count: intp(0), Percent: intp(50)}, 5, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := testBudget(tc.cfg)
			if got := b.Limit(tc.nodes); got != tc.want {
				t.Fatalf("limit = %d, want %d", got, tc.want)
			}
		})
	}
	if b, _ := testBudget(BudgetConfig{Disabled: true}); b != nil {
		t.Fatal("a disabled budget must not exist")
	}
}

// TestDeletionBudgetWindow walks one scenario step by step: distinct Nodes
// are counted once, an admitted Node stays admitted, a deferred Node is
// reported once per window, and deferred Nodes pass as the window slides.
func TestDeletionBudgetWindow(t *testing.T) {
	b, clock := testBudget(BudgetConfig{Count: intp(2), Percent: intp(0), Window: metav1.Duration{Duration: 10 * time.Minute}})
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
		clock.advance(s.after)
		d := b.Admit(s.node, 100, clock.now)
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

// checkBudget replays steps through a budget of limit Nodes per
// propertyWindow and fails if any window holds more distinct admitted
// Nodes than limit, or if a Node admitted is refused within its window.
func checkBudget(t testing.TB, limit, nodes int, steps []budgetStep) {
	b, clock := testBudget(BudgetConfig{Count: intp(limit), Percent: intp(0), Window: metav1.Duration{Duration: propertyWindow}})
	var admissions []time.Time // when a Node was freshly admitted
	lastAdmitted := map[string]time.Time{}
	for _, s := range steps {
		clock.advance(s.advance)
		d := b.Admit(s.node, nodes, clock.now)
		if at, ok := lastAdmitted[s.node]; ok && clock.now.Sub(at) < propertyWindow && !d.Admitted {
			t.Fatalf("%s admitted at %v was refused %v later", s.node, at, clock.now.Sub(at))
		}
		if d.Fresh {
			admissions = append(admissions, clock.now)
			lastAdmitted[s.node] = clock.now
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
