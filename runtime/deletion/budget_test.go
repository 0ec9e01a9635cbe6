package deletion

import (
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
)

func intp(v int) *int { return &v }

// testBudget returns the budget cfg asks for, without corroboration
// unless cfg sets it: these tests are about the budget's own arithmetic
// (corroborate_test.go is about the rest).
func testBudget(cfg cloudconfig.DeletionBudget) *Budget {
	if cfg.Corroborated == (cloudconfig.Corroboration{}) {
		cfg.Corroborated.Disabled = true
	}
	return NewBudget("test", cfg)
}

func TestDeletionBudgetLimit(t *testing.T) {
	cases := []struct {
		name  string
		cfg   cloudconfig.DeletionBudget
		nodes int
		want  int
	}{
		{"defaults, 3 nodes", cloudconfig.DeletionBudget{}, 3, 1},
		{"defaults, 199 nodes", cloudconfig.DeletionBudget{}, 199, 1},
		{"defaults, 1000 nodes", cloudconfig.DeletionBudget{}, 1000, 10},
		{"defaults, 5000 nodes", cloudconfig.DeletionBudget{}, 5000, 50},
		{"defaults before the Node cache synced", cloudconfig.DeletionBudget{}, 0, 1},
		{"count wins", cloudconfig.DeletionBudget{Count: intp(5), Percent: intp(10)}, 30, 5},
		{"percent wins", cloudconfig.DeletionBudget{Count: intp(5), Percent: intp(10)}, 80, 8},
		{"explicit zero defers everything", cloudconfig.DeletionBudget{Count: intp(0), Percent: intp(0)}, 1000, 0},
		{"percent only", cloudconfig.DeletionBudget{Count: intp(0), Percent: intp(50)}, 5, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := testBudget(tc.cfg)
			if got := b.Limit(tc.nodes); got != tc.want {
				t.Fatalf("limit = %d, want %d", got, tc.want)
			}
		})
	}
	if b := testBudget(cloudconfig.DeletionBudget{Disabled: true}); b != nil {
		t.Fatal("a disabled budget must not exist")
	}
	if got := testBudget(cloudconfig.DeletionBudget{}).Length(); got != 10*time.Minute {
		t.Fatalf("default window %s, want 10m", got)
	}
	if got := testBudget(cloudconfig.DeletionBudget{Window: cloudconfig.Duration{Duration: 3 * time.Minute}}).Length(); got != 3*time.Minute {
		t.Fatalf("window %s, want the configured 3m", got)
	}
}
