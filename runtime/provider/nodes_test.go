package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/lifecycletest"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/deletion"
)

func intp(v int) *int { return &v }

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
			c := newCloud(t, lifecycletest.Guest(t, "testprovider"), func(cfg *cloudconfig.Config) {
				cfg.Safety.MaxNodeDeletions = cloudconfig.DeletionBudget{Count: intp(tc.count), Percent: intp(0)}
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
					if exists || tc.wantGone != (err == nil) || tc.wantError != errors.Is(err, deletion.ErrDeferred) {
						t.Fatalf("%s = %v, %v", name, exists, err)
					}
				}
				// The budget of one is taken by the first path's Node.
				c.budget = deletion.NewBudget("test", c.cfg.Safety.MaxNodeDeletions)
			}
			if exists, err := v2.InstanceExists(ctx, node("present")); !exists || err != nil {
				t.Fatalf("present Node: %v, %v", exists, err)
			}
		})
	}
}

// TestDeletionBudgetOverModule: the all-gone module in service (shadowing
// off) with a budget of two Nodes: two Nodes are answered gone, however
// often they are asked, and every other answer becomes an error.
func TestDeletionBudgetOverModule(t *testing.T) {
	e := newSimcloudEnv(t, 5, cloudconfig.Rollout{Shadow: cloudconfig.Shadow{Disabled: true}})
	e.c.budget = deletion.NewBudget("test", cloudconfig.DeletionBudget{Count: intp(2), Percent: intp(0)})
	e.replace(t, "allgone")
	i, _ := e.c.InstancesV2()
	gone := map[string]bool{}
	for range 3 {
		for _, n := range e.nodes {
			exists, err := i.InstanceExists(context.Background(), n)
			switch {
			case err == nil && !exists:
				gone[n.Name] = true
			case err == nil || exists:
				t.Fatalf("InstanceExists(%s) = %v, %v", n.Name, exists, err)
			}
		}
	}
	if len(gone) != 2 || !gone["node-0"] || !gone["node-1"] {
		t.Fatalf("answered gone for %v; want node-0 and node-1 only", gone)
	}
}

// markReady gives names a Ready condition and waits for the Node cache to
// see it.
func (e *simcloudEnv) markReady(t *testing.T, names []string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range names {
		n, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
		if _, err := e.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ready := 0
		for _, n := range e.c.listNodes() {
			if deletion.ReadyAndInitialized(n) {
				ready++
			}
		}
		if ready == len(names) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Nodes Ready in the cache", ready, len(names))
		}
	}
}

// TestCorroboratedDeletions: ten Nodes, a budget of one Node and the
// default ceiling of half the cluster. The first few Nodes go down in the
// cloud (deleted or stopped, or not at all), the rest stay Ready; every
// down Node is asked about twice, as the lifecycle controller would. A
// real scale-down passes the budget up to the ceiling; an answer that the
// control probe or the previous module contradicts is held to the budget.
func TestCorroboratedDeletions(t *testing.T) {
	const nodes = 10
	deleted := func(e *simcloudEnv, id string) error { return e.cloud.DeleteInstance(id) }
	stopped := func(e *simcloudEnv, id string) error { return e.cloud.SetInstanceState(id, "stopped") }
	running := func(*simcloudEnv, string) error { return nil }
	noShadow := cloudconfig.Rollout{Shadow: cloudconfig.Shadow{Disabled: true}}
	noShadowNoRollback := cloudconfig.Rollout{Shadow: cloudconfig.Shadow{Disabled: true}, Rollback: cloudconfig.Rollback{Disabled: true}}
	cases := []struct {
		name          string
		rollout       cloudconfig.Rollout
		corroboration cloudconfig.Corroboration
		// module replaces simcloud's before the Nodes go down, if set.
		module   string
		down     int
		goDown   func(e *simcloudEnv, id string) error
		noReady  bool
		wantGone int
		wantWhy  string
	}{
		{name: "scale-down", down: 4, goDown: deleted, wantGone: 4},
		{name: "scale-down past the ceiling", down: 7, goDown: deleted, wantGone: 5, wantWhy: "ceiling reached"},
		{name: "no Ready Node to probe", down: 4, goDown: deleted, noReady: true, wantGone: 1, wantWhy: "no Ready Node"},
		{name: "corroboration disabled", down: 4, goDown: deleted, corroboration: cloudconfig.Corroboration{Disabled: true}, wantGone: 1, wantWhy: "disabled"},
		{name: "all-gone release, no previous module", rollout: noShadowNoRollback, module: "allgone", down: 4, goDown: running, wantGone: 1, wantWhy: "is gone too"},
		{name: "stopped-as-gone release on probation", rollout: noShadow, module: "stoppedgone", down: 4, goDown: stopped, wantGone: 1, wantWhy: "previous module"},
		// The trade-off SECURITY.md states: a module wrong only about
		// NotReady Nodes, past its probation, is bounded by the ceiling.
		{name: "stopped-as-gone module past probation", rollout: noShadowNoRollback, module: "stoppedgone", down: 4, goDown: stopped, wantGone: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newSimcloudEnv(t, nodes, tc.rollout)
			e.c.budget = deletion.NewBudget("test", cloudconfig.DeletionBudget{Count: intp(1), Percent: intp(0), Corroborated: tc.corroboration})
			if !tc.noReady {
				var ready []string
				for _, n := range e.nodes[tc.down:] {
					ready = append(ready, n.Name)
				}
				e.markReady(t, ready)
			}
			if tc.module != "" {
				e.replace(t, tc.module)
			}
			for _, n := range e.nodes[:tc.down] {
				if err := tc.goDown(e, e.instances[n.Name]); err != nil {
					t.Fatal(err)
				}
			}
			i, _ := e.c.InstancesV2()
			gone := map[string]bool{}
			for range 2 {
				for _, n := range e.nodes[:tc.down] {
					exists, err := i.InstanceExists(context.Background(), n)
					switch {
					case err == nil && !exists:
						gone[n.Name] = true
					case errors.Is(err, deletion.ErrDeferred):
						if !strings.Contains(err.Error(), tc.wantWhy) || tc.wantWhy == "" {
							t.Errorf("InstanceExists(%s): %v; want the reason to name %q", n.Name, err, tc.wantWhy)
						}
					default:
						t.Fatalf("InstanceExists(%s) = %v, %v", n.Name, exists, err)
					}
				}
			}
			if len(gone) != tc.wantGone {
				t.Fatalf("answered gone for %d Nodes (%v), want %d", len(gone), gone, tc.wantGone)
			}
			// The Ready Nodes were never answered gone.
			for _, n := range e.nodes[tc.down:] {
				if gone[n.Name] {
					t.Fatalf("Ready Node %s answered gone", n.Name)
				}
			}
		})
	}
}

// TestControlProbeIsCached: a scale-down of many Nodes probes the module
// once per deletion.ProbeTTL, not once per Node.
func TestControlProbeIsCached(t *testing.T) {
	e := newSimcloudEnv(t, 20, cloudconfig.Rollout{})
	e.c.budget = deletion.NewBudget("test", cloudconfig.DeletionBudget{Count: intp(1), Percent: intp(0)})
	var ready []string
	for _, n := range e.nodes[8:] {
		ready = append(ready, n.Name)
	}
	e.markReady(t, ready)
	for _, n := range e.nodes[:8] {
		if err := e.cloud.DeleteInstance(e.instances[n.Name]); err != nil {
			t.Fatal(err)
		}
	}
	// The same module and Node cache, its calls counted.
	counting := &countingBackend{Backend: *e.c.modules.InService()}
	c := NewWithBackend(e.c.cfg, counting)
	c.nodes.Store(e.c.nodes.Load())
	c.budget = e.c.budget
	i, _ := c.InstancesV2()
	before := requests(e)
	for _, n := range e.nodes[:8] {
		if exists, err := i.InstanceExists(context.Background(), n); exists || err != nil {
			t.Fatalf("InstanceExists(%s) = %v, %v", n.Name, exists, err)
		}
	}
	// One module call per answer, plus deletion.ProbeNodes for the one probe
	// (a probe per answer would make 8 × 3 more). Cloud requests: at most
	// as many, fewer where the module answers from its shared listing.
	if got, want := counting.calls.Load(), int64(8+deletion.ProbeNodes); got != want {
		t.Fatalf("%d module calls for 8 answers, want %d", got, want)
	}
	if got, most := requests(e)-before, 8+deletion.ProbeNodes; got > most {
		t.Fatalf("%d cloud requests for 8 answers, want at most %d", got, most)
	}
}

// countingBackend counts the calls that reach the module.
type countingBackend struct {
	Backend
	calls atomic.Int64
}

func (b *countingBackend) Call(ctx context.Context, export string, in, out abi.Message) error {
	b.calls.Add(1)
	return b.Backend.Call(ctx, export, in, out)
}
