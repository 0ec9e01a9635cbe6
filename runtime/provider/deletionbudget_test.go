package provider

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
)

func intp(v int) *int { return &v }

// fakeClock is a settable clock for the budget.
type fakeClock struct{ now time.Time }

func (f *fakeClock) Now() time.Time          { return f.now }
func (f *fakeClock) advance(d time.Duration) { f.now = f.now.Add(d) }

// testBudget returns the budget cfg asks for, without corroboration
// unless cfg sets it: these tests are about the budget's own arithmetic
// (corroborate_test.go is about the rest).
func testBudget(cfg DeletionBudgetConfig, nodes int) (*deletionBudget, *fakeClock) {
	if cfg.Corroborated == (CorroborationConfig{}) {
		cfg.Corroborated.Disabled = true
	}
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	b := newDeletionBudget(cfg, func() int { return nodes })
	if b != nil {
		b.now = clock.Now
	}
	return b, clock
}

func TestDeletionBudgetLimit(t *testing.T) {
	cases := []struct {
		name  string
		cfg   DeletionBudgetConfig
		nodes int
		want  int
	}{
		{"defaults, 3 nodes", DeletionBudgetConfig{}, 3, 1},
		{"defaults, 199 nodes", DeletionBudgetConfig{}, 199, 1},
		{"defaults, 1000 nodes", DeletionBudgetConfig{}, 1000, 10},
		{"defaults, 5000 nodes", DeletionBudgetConfig{}, 5000, 50},
		{"defaults before the Node cache synced", DeletionBudgetConfig{}, 0, 1},
		{"count wins", DeletionBudgetConfig{Count: intp(5), Percent: intp(10)}, 30, 5},
		{"percent wins", DeletionBudgetConfig{Count: intp(5), Percent: intp(10)}, 80, 8},
		{"explicit zero defers everything", DeletionBudgetConfig{Count: intp(0), Percent: intp(0)}, 1000, 0},
		{"percent only", DeletionBudgetConfig{Count: intp(0), Percent: intp(50)}, 5, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := testBudget(tc.cfg, tc.nodes)
			if got := b.limit(); got != tc.want {
				t.Fatalf("limit = %d, want %d", got, tc.want)
			}
		})
	}
	if b, _ := testBudget(DeletionBudgetConfig{Disabled: true}, 10); b != nil {
		t.Fatal("a disabled budget must not exist")
	}
}

// TestDeletionBudgetWindow walks one scenario step by step: distinct Nodes
// are counted once, an admitted Node stays admitted, a deferred Node is
// reported once per window, and deferred Nodes pass as the window slides.
func TestDeletionBudgetWindow(t *testing.T) {
	b, clock := testBudget(DeletionBudgetConfig{Count: intp(2), Percent: intp(0), Window: metav1.Duration{Duration: 10 * time.Minute}}, 100)
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
		d := b.admit(s.node)
		if d.admitted != s.admit || d.fresh != s.fresh || d.report != s.report {
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
	b, clock := testBudget(DeletionBudgetConfig{Count: intp(limit), Percent: intp(0), Window: metav1.Duration{Duration: propertyWindow}}, nodes)
	var admissions []time.Time // when a Node was freshly admitted
	lastAdmitted := map[string]time.Time{}
	for _, s := range steps {
		clock.advance(s.advance)
		d := b.admit(s.node)
		if at, ok := lastAdmitted[s.node]; ok && clock.now.Sub(at) < propertyWindow && !d.admitted {
			t.Fatalf("%s admitted at %v was refused %v later", s.node, at, clock.now.Sub(at))
		}
		if d.fresh {
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

func TestParseSafetyAndRolloutConfig(t *testing.T) {
	cases := []struct{ name, yaml, wantErr string }{
		{"full", `module:
  path: x
  rollout:
    shadow: {duration: 1m, calls: 10, concurrency: 2}
    rollback: {window: 10m, minCalls: 5, failurePercent: 50}
safety: {maxNodeDeletions: {count: 3, percent: 5, window: 15m, corroborated: {percent: 20}}}
`, ""},
		{"disabled", "module: {path: x, rollout: {shadow: {disabled: true}, rollback: {disabled: true}}}\nsafety: {maxNodeDeletions: {disabled: true}}\n", ""},
		{"percent over 100", "module: {path: x}\nsafety: {maxNodeDeletions: {percent: 101}}\n", "outside 0..100"},
		{"corroborated percent over 100", "module: {path: x}\nsafety: {maxNodeDeletions: {corroborated: {percent: 150}}}\n", "corroborated.percent 150 is outside"},
		{"negative count", "module: {path: x}\nsafety: {maxNodeDeletions: {count: -1}}\n", "is negative"},
		{"typo", "module: {path: x}\nsafety: {maxNodeDeletion: {count: 1}}\n", `unknown field "maxNodeDeletion"`},
		{"bad failure percent", "module: {path: x, rollout: {rollback: {failurePercent: 200}}}\n", "failurePercent"},
		{"negative shadow", "module: {path: x, rollout: {shadow: {duration: -1s}}}\n", "must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(strings.NewReader(tc.yaml))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestDeletionBudgetGuardsEveryPath: both "gone" answers of the test
// provider, by InstancesV2 and by the legacy provider ID call, pass a
// budget of one Node and are deferred by a budget of zero; other answers
// are untouched.
func TestDeletionBudgetGuardsEveryPath(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		count     int
		wantGone  bool
		wantError bool
	}{{1, true, false}, {0, false, true}} {
		t.Run(fmt.Sprint("count=", tc.count), func(t *testing.T) {
			c := newCloud(t, guest(t, "testprovider"), func(cfg *Config) {
				cfg.Safety.MaxNodeDeletions = DeletionBudgetConfig{Count: intp(tc.count), Percent: intp(0)}
			})
			v2, _ := c.InstancesV2()
			legacy, _ := c.Instances()
			answers := map[string]func() (bool, error){
				"InstanceExists":             func() (bool, error) { return v2.InstanceExists(ctx, node("missing")) },
				"InstanceExistsByProviderID": func() (bool, error) { return legacy.InstanceExistsByProviderID(ctx, "test://missing") },
				// The legacy path: InstanceNotFound is what deletes the Node.
				"InstanceID": func() (bool, error) {
					_, err := legacy.InstanceID(ctx, "missing")
					if errors.Is(err, cloudprovider.InstanceNotFound) {
						return false, nil
					}
					return err == nil, err
				},
			}
			for name, answer := range answers {
				// The same Node twice: one unit of the budget, not two.
				for range 2 {
					exists, err := answer()
					if exists || tc.wantGone != (err == nil) || tc.wantError != errors.Is(err, errDeletionDeferred) {
						t.Fatalf("%s = %v, %v", name, exists, err)
					}
				}
				// The budget of one is taken by the first path's Node.
				c.budget = newDeletionBudget(c.cfg.Safety.MaxNodeDeletions, c.nodeCount)
			}
			if exists, err := v2.InstanceExists(ctx, node("present")); !exists || err != nil {
				t.Fatalf("present Node: %v, %v", exists, err)
			}
		})
	}
}
