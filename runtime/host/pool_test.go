package host

import (
	"context"
	"slices"
	"testing"

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
		return nodeListAffinity{listsNodes: true, nodes: list}
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
				p.release(inst)
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
