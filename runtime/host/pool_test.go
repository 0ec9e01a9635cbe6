package host

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/wasmccm/wasmccm/abi"
)

// TestPoolAffinity: of the idle instances, a call takes the one its
// nodeListAffinity ranks highest, the most recently released among equals,
// so that the instances holding a Node list stay few.
func TestPoolAffinity(t *testing.T) {
	listX := []abi.Node{{Name: "a"}}
	listY := slices.Clone(listX) // equal, but another list
	none := func() *instance { return &instance{} }
	holding := func(list []abi.Node) func() *instance {
		return func() *instance { return &instance{nodes: list, sentNodes: true} }
	}
	lbCall := func(list []abi.Node) nodeListAffinity {
		return nodeListAffinity{req: &abi.LoadBalancerRequest{Nodes: list}}
	}
	for _, tc := range []struct {
		name string
		idle []func() *instance // released in this order
		want nodeListAffinity
		took int // index in idle
	}{
		{"no preference takes the last released", []func() *instance{none, none}, nodeListAffinity{}, 1},
		{"another call avoids a holder", []func() *instance{none, holding(listX)}, nodeListAffinity{}, 0},
		{"another call takes a holder when all hold", []func() *instance{holding(listX), holding(listY)}, nodeListAffinity{}, 1},
		{"a load balancer call takes the holder of its list", []func() *instance{holding(listX), holding(listY), none}, lbCall(listX), 0},
		{"then a holder of another list", []func() *instance{holding(listY), none}, lbCall(listX), 0},
		{"then the last released", []func() *instance{none, none}, lbCall(listX), 1},
		{"an empty list is a list", []func() *instance{holding(nil), none}, lbCall(nil), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool("pool-affinity", len(tc.idle), func(context.Context) (*instance, error) {
				t.Fatal("an instance was made while some were idle")
				return nil, nil
			})
			var idle []*instance
			for _, newIdle := range tc.idle {
				inst := newIdle()
				idle = append(idle, inst)
				p.slots <- struct{}{}
				p.release(inst, time.Now())
			}
			inst, err := p.acquire(context.Background(), tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Index(idle, inst); got != tc.took {
				t.Fatalf("took idle instance %d, want %d", got, tc.took)
			}
			if left := len(p.idle); left != len(tc.idle)-1 || slices.Contains(p.idle, inst) {
				t.Fatalf("idle after acquire: %d instances, taken one among them: %v", left, slices.Contains(p.idle, inst))
			}
		})
	}
}

// TestPoolClosesIdleInstances: a release closes the instances idle for
// longer than the pool's idle timeout, and no other, and counts them; the
// module's calls go on.
func TestPoolClosesIdleInstances(t *testing.T) {
	ctx := context.Background()
	mod, err := New(ctx, abiModule(okEmpty, nil), Config{Name: "idle-close", PoolSize: 3, CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	p := mod.pool
	var insts []*instance
	for range 3 {
		inst, err := p.acquire(ctx, nodeListAffinity{})
		if err != nil {
			t.Fatal(err)
		}
		insts = append(insts, inst)
	}
	for _, inst := range insts {
		p.release(inst, time.Now())
	}
	long := time.Now().Add(-2 * p.idleTimeout)
	insts[0].idleSince, insts[1].idleSince = long, long
	closedBefore, _ := testutil.GetCounterMetricValue(instancesIdleClosed.WithLabelValues("idle-close"))

	inst, err := p.acquire(ctx, nodeListAffinity{})
	if err != nil {
		t.Fatal(err)
	}
	if inst != insts[2] {
		t.Fatal("the pool did not hand out the most recently released instance")
	}
	p.release(inst, time.Now())
	closed, _ := testutil.GetCounterMetricValue(instancesIdleClosed.WithLabelValues("idle-close"))
	if !insts[0].mod.IsClosed() || !insts[1].mod.IsClosed() || insts[2].mod.IsClosed() || closed-closedBefore != 2 {
		t.Fatalf("closed: %v %v %v, counted %v; want the two idle for long, counted",
			insts[0].mod.IsClosed(), insts[1].mod.IsClosed(), insts[2].mod.IsClosed(), closed-closedBefore)
	}
	if !slices.Equal(p.idle, []*instance{insts[2]}) {
		t.Fatalf("idle after the release: %d instances, want the one just released", len(p.idle))
	}
	for range 3 {
		if err := mod.Call(ctx, abi.ExportInstanceExists, &abi.Node{Name: "a"}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPoolIdleCloseRacesClose: calls whose releases close idle instances,
// every one idle too long, run while the module is closed. Close waits
// for them, no call fails but for the module being closed, and no
// instance outlives Close. Run it with -race.
func TestPoolIdleCloseRacesClose(t *testing.T) {
	ctx := context.Background()
	mod, err := New(ctx, abiModule(okEmpty, nil), Config{Name: "idle-close-race", PoolSize: 4, CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mod.pool.idleTimeout = 0 // every release closes all other idle instances
	closedBefore, _ := testutil.GetCounterMetricValue(instancesIdleClosed.WithLabelValues("idle-close-race"))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := mod.Call(ctx, abi.ExportInstanceExists, &abi.Node{Name: "a"}, nil)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Close once the race is on: releases are closing idle instances.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if closed, _ := testutil.GetCounterMetricValue(instancesIdleClosed.WithLabelValues("idle-close-race")); closed > closedBefore+2 {
			break
		}
	}
	if err := mod.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	live := liveInstancesOf(mod)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call failed: %v", err)
	}
	if live != 0 {
		t.Fatalf("Close returned with %d instances of the module live", live)
	}
	if closed, _ := testutil.GetCounterMetricValue(instancesIdleClosed.WithLabelValues("idle-close-race")); closed == closedBefore {
		t.Fatal("no idle instance was closed: the test raced nothing")
	}
}
