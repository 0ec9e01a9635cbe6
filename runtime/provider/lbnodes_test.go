package provider

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmccm/wasmccm/abi"
)

// TestLBNodeList: load balancer calls get the same Node list, as the same
// slice, while what they carry of the Nodes is the same, whatever the
// order and whichever objects carry it; a change to any of it, a Node more
// or fewer, or a Node listed twice makes a new list, sorted by name.
func TestLBNodeList(t *testing.T) {
	node := func(i int) *v1.Node {
		return &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)), ResourceVersion: "1"},
			Spec:       v1.NodeSpec{ProviderID: fmt.Sprintf("sim://i-%d", i)},
			Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", i)}}},
		}
	}
	nodes := []*v1.Node{node(3), node(1), node(2)}
	copied := func(mutate func(*v1.Node)) []*v1.Node {
		out := []*v1.Node{nodes[1].DeepCopy(), nodes[2].DeepCopy(), nodes[0].DeepCopy()}
		if mutate != nil {
			mutate(out[0])
		}
		return out
	}
	var l lbNodeList
	first := l.get(nodes)
	if names := []string{first[0].Name, first[1].Name, first[2].Name}; !slices.Equal(names, []string{"node-1", "node-2", "node-3"}) {
		t.Fatalf("list %v, want it sorted by name", names)
	}
	if !sameNode(first[0], abi.Node{Name: "node-1", UID: "uid-1", ProviderID: "sim://i-1", Addresses: []abi.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}}}) {
		t.Fatalf("first entry %+v", first[0])
	}
	for _, c := range []struct {
		name  string
		nodes []*v1.Node
		same  bool
	}{
		{"the same objects", nodes, true},
		{"copies, in another order", copied(nil), true},
		{"a status heartbeat", copied(func(n *v1.Node) {
			n.ResourceVersion = "2"
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
			n.Labels = map[string]string{"x": "y"}
		}), true},
		{"an address changed", copied(func(n *v1.Node) { n.Status.Addresses[0].Address = "10.9.9.9" }), false},
		{"an address added", copied(func(n *v1.Node) {
			n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: n.Name})
		}), false},
		{"a provider ID set", copied(func(n *v1.Node) { n.Spec.ProviderID = "sim://i-9" }), false},
		{"a Node recreated", copied(func(n *v1.Node) { n.UID = "uid-new" }), false},
		{"a Node fewer", nodes[:2], false},
		{"a Node more", append(slices.Clone(nodes), node(4)), false},
		{"a Node twice", []*v1.Node{nodes[0], nodes[1], nodes[1]}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l lbNodeList
			before := l.get(nodes)
			got := l.get(c.nodes)
			if abi.SameNodes(got, before) != c.same {
				t.Fatalf("same list = %v, want %v", !c.same, c.same)
			}
			if len(got) != len(c.nodes) {
				t.Fatalf("%d Nodes in the list, want %d", len(got), len(c.nodes))
			}
			for _, n := range c.nodes {
				i := slices.IndexFunc(got, func(a abi.Node) bool { return a.Name == n.Name })
				if i < 0 || !sameNode(got[i], toLBNode(n)) {
					t.Fatalf("list %+v does not carry %s as it is", got, n.Name)
				}
			}
		})
	}
}

func sameNode(a, b abi.Node) bool {
	return a.Name == b.Name && a.UID == b.UID && a.ProviderID == b.ProviderID && slices.Equal(a.Addresses, b.Addresses)
}
