package host

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
)

// TestNodeListSentOnce: a module with abi.ExportSetLoadBalancerNodes is
// sent a load balancer call's Node list once, for as long as the calls
// pass the same list, and answers the calls sent without it with that
// list; a new list, even an equal one, is sent again, an empty one too,
// and so is the list to an instance that replaced a failed one. The test
// provider answers EnsureLoadBalancer with 192.0.2.N for N Nodes, and
// UpdateLoadBalancer with an error when it has none.
func TestNodeListSentOnce(t *testing.T) {
	ctx := context.Background()
	svc := abi.Service{Namespace: "default", Name: "web"}
	nodes := func(names ...string) []abi.Node {
		var list []abi.Node
		for _, n := range names {
			list = append(list, abi.Node{Name: n, ProviderID: "test://" + n})
		}
		return list
	}
	for _, tc := range toolchains(t) {
		t.Run(string(tc), func(t *testing.T) {
			f := newFixture(t, tc, func(c *Config) { c.PoolSize = 1 }) // one instance holds the list
			if !slices.Contains(f.mod.Info().Optional, abi.ExportSetLoadBalancerNodes) {
				t.Fatalf("optional exports %v: the SDK's load balancer package must export %s", f.mod.Info().Optional, abi.ExportSetLoadBalancerNodes)
			}
			sent := func() float64 {
				n, _ := testutil.GetCounterMetricValue(callsTotal.WithLabelValues(f.mod.Name(), abi.ExportSetLoadBalancerNodes, "ok"))
				return n
			}
			two, three := nodes("a", "b"), nodes("a", "b", "c")
			ensure := func(list []abi.Node, wantIP string, wantSent float64) {
				t.Helper()
				before := sent()
				var status abi.LoadBalancerStatus
				if err := f.mod.Call(ctx, abi.ExportEnsureLoadBalancer, &abi.LoadBalancerRequest{Service: svc, Nodes: list}, &status); err != nil {
					t.Fatal(err)
				}
				if len(status.Ingress) != 1 || status.Ingress[0].IP != wantIP {
					t.Fatalf("EnsureLoadBalancer over %d Nodes answered %+v, want %s", len(list), status, wantIP)
				}
				if got := sent() - before; got != wantSent {
					t.Fatalf("EnsureLoadBalancer over %d Nodes sent the list %v times, want %v", len(list), got, wantSent)
				}
			}
			ensure(two, "192.0.2.2", 1)
			ensure(two, "192.0.2.2", 0)
			ensure(three, "192.0.2.3", 1)
			ensure(three, "192.0.2.3", 0)
			ensure(slices.Clone(three), "192.0.2.3", 1)

			before := sent()
			err := f.mod.Call(ctx, abi.ExportUpdateLoadBalancer, &abi.LoadBalancerRequest{Service: svc}, nil)
			if err == nil || sent()-before != 1 {
				t.Fatalf("UpdateLoadBalancer without Nodes after a list of three: %v, list sent %v times; want the empty list sent and the provider's error", err, sent()-before)
			}
			if err := f.mod.Call(ctx, abi.ExportGetLoadBalancer, &abi.LoadBalancerRequest{Service: svc}, &abi.GetLoadBalancerResult{}); err != nil || sent()-before != 1 {
				t.Fatalf("GetLoadBalancer, which lists no Nodes: %v, list sent %v more times", err, sent()-before-1)
			}

			ensure(two, "192.0.2.2", 1)
			if err := f.mod.Call(ctx, abi.ExportInstanceExists, &abi.Node{Name: "trap"}, new(abi.Bool)); err == nil {
				t.Fatal("a trapping call succeeded")
			}
			ensure(two, "192.0.2.2", 1) // the replacement instance holds no list
			ensure(two, "192.0.2.2", 0)

			// A list sent by a caller of the export itself.
			if err := f.mod.Call(ctx, abi.ExportSetLoadBalancerNodes, &abi.LoadBalancerNodes{Nodes: three}, nil); err != nil {
				t.Fatal(err)
			}
			ensure(two, "192.0.2.2", 1)

			// The host keeps no buffer the size of a list it sent.
			many := nodes(slices.Repeat([]string{"node-with-a-long-name"}, 500)...)
			ensure(many, "192.0.2.500", 1)
			listBytes := len(abi.Marshal(nil, &abi.LoadBalancerNodes{Nodes: many}))
			if held := cap(f.mod.pool.idle[0].input); held >= listBytes {
				t.Fatalf("after a list of %d bytes, the instance's input buffer holds %d", listBytes, held)
			}

			// A new list that fits where the last one was grows no memory;
			// the instance still holds a list, and its mark stays up.
			inst := f.mod.pool.idle[0]
			raised := inst.recycleAbove
			if raised <= inst.owner.cfg.recycleMark(inst.readyBytes) {
				t.Fatalf("mark %d after a list of 500 Nodes, want it above the instance's base mark", raised)
			}
			ensure(slices.Clone(many), "192.0.2.500", 1)
			if inst != f.mod.pool.idle[0] || inst.recycleAbove < raised {
				t.Fatalf("after an equal list: same instance %v, mark %d, want it at least %d", inst == f.mod.pool.idle[0], inst.recycleAbove, raised)
			}

			// An instance recycled after every call: each successor is sent
			// the list, and the operator is told why, once.
			var log lockedBuffer
			klog.LogToStderr(false)
			klog.SetOutput(&log)
			defer klog.LogToStderr(true)
			recycled := newFixture(t, tc, func(c *Config) { c.PoolSize, c.RecycleAbovePages = 1, 1 })
			f.mod = recycled.mod
			ensure(two, "192.0.2.2", 1)
			ensure(two, "192.0.2.2", 1)
			klog.Flush()
			if n := strings.Count(log.String(), "below what an instance holding its load balancer Node list takes"); n != 1 {
				t.Fatalf("the mark below the list was logged %d times, want once:\n%s", n, log.String())
			}
		})
	}
}

// TestNodeListAffinityThroughCall: with two instances in the pool, a load
// balancer call finds its list in the instance holding it even when the
// other instance was released last, as when two calls end together; calls
// of other exports take the instance holding no list; and a call with
// another list replaces the list where it is, so one instance ever holds
// a list. Taking the last released instance instead sends the list again.
func TestNodeListAffinityThroughCall(t *testing.T) {
	ctx := context.Background()
	svc := abi.Service{Namespace: "default", Name: "web"}
	listX := []abi.Node{{Name: "a", ProviderID: "test://a"}, {Name: "b", ProviderID: "test://b"}}
	listY := []abi.Node{{Name: "a", ProviderID: "test://a"}}
	for _, tc := range toolchains(t) {
		t.Run(string(tc), func(t *testing.T) {
			f := newFixture(t, tc, func(c *Config) { c.PoolSize = 2 })
			var insts []*instance
			// endTogether takes both instances and gives them back as two
			// calls ending together would, the one holding no list last.
			endTogether := func() {
				t.Helper()
				insts = insts[:0]
				for range 2 {
					inst, err := f.mod.pool.acquire(ctx, nodeListAffinity{})
					if err != nil {
						t.Fatal(err)
					}
					insts = append(insts, inst)
				}
				slices.SortFunc(insts, func(a, b *instance) int {
					if a.sentNodes == b.sentNodes {
						return 0
					}
					if a.sentNodes {
						return -1
					}
					return 1
				})
				for _, inst := range insts {
					f.mod.pool.release(inst, time.Now())
				}
			}
			endTogether()
			sent := func() float64 {
				n, _ := testutil.GetCounterMetricValue(callsTotal.WithLabelValues(f.mod.Name(), abi.ExportSetLoadBalancerNodes, "ok"))
				return n
			}
			ensure := func(list []abi.Node, wantSent float64) {
				t.Helper()
				before := sent()
				if err := f.mod.Call(ctx, abi.ExportEnsureLoadBalancer, &abi.LoadBalancerRequest{Service: svc, Nodes: list}, &abi.LoadBalancerStatus{}); err != nil {
					t.Fatal(err)
				}
				if got := sent() - before; got != wantSent {
					t.Fatalf("EnsureLoadBalancer over %d Nodes sent the list %v times, want %v", len(list), got, wantSent)
				}
			}
			other := func() {
				t.Helper()
				if err := f.mod.Call(ctx, abi.ExportInstanceExists, &abi.Node{Name: "a", ProviderID: "test://a"}, new(abi.Bool)); err != nil {
					t.Fatal(err)
				}
			}
			ensure(listX, 1)
			endTogether()
			ensure(listX, 0)
			other()
			ensure(listX, 0)
			endTogether()
			other()
			ensure(listY, 1)
			endTogether()
			ensure(listY, 0)
			holders := 0
			for _, inst := range f.mod.pool.idle {
				if inst.sentNodes {
					holders++
				}
			}
			if len(f.mod.pool.idle) != 2 || holders != 1 {
				t.Fatalf("%d idle instances, %d holding a list; want 2 and 1", len(f.mod.pool.idle), holders)
			}
		})
	}
}
