package provider

import (
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmccm/wasmccm/abi"
)

// lbNodeList is the Node list of load balancer calls, kept from one call
// to the next. The service controller passes every eligible Node to every
// EnsureLoadBalancer and UpdateLoadBalancer; while what those calls carry
// of them (toLBNode) stays the same, they get the same slice, which the
// host sends a module only once (abi.ExportSetLoadBalancerNodes) and from
// which a provider may keep what it derived (abi.SameNodes). A Node
// updated in a field the list leaves out, as a status heartbeat is, does
// not make a new list.
type lbNodeList struct {
	mu    sync.Mutex
	nodes []abi.Node // sorted by name; never changed once returned
	index map[string]int
	// seen marks the entries a comparison has met, with the comparison's
	// number, so that a list naming one Node twice is not taken for the
	// same list.
	seen  []uint64
	round uint64
}

// get returns the list of nodes: the one returned last if it carries the
// same, or a new one.
func (l *lbNodeList) get(nodes []*v1.Node) []abi.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.same(nodes) {
		return l.nodes
	}
	list := make([]abi.Node, len(nodes))
	for i, n := range nodes {
		list[i] = toLBNode(n)
	}
	slices.SortFunc(list, func(a, b abi.Node) int { return strings.Compare(a.Name, b.Name) })
	l.nodes, l.index, l.seen = list, make(map[string]int, len(list)), make([]uint64, len(list))
	for i := range list {
		l.index[list[i].Name] = i
	}
	return list
}

func (l *lbNodeList) same(nodes []*v1.Node) bool {
	if l.index == nil || len(nodes) != len(l.nodes) {
		return false
	}
	l.round++
	for _, n := range nodes {
		i, ok := l.index[n.Name]
		if !ok || l.seen[i] == l.round || !sameLBNode(&l.nodes[i], n) {
			return false
		}
		l.seen[i] = l.round
	}
	return true
}

// toLBNode is what a load balancer call carries of a Node: only what a
// load balancer targets. The list holds every Node of the cluster, and
// labels and annotations made it the bulk of each call's cost at scale
// (BENCHMARKS.md).
func toLBNode(n *v1.Node) abi.Node {
	return abi.Node{Name: n.Name, UID: string(n.UID), ProviderID: n.Spec.ProviderID, Addresses: toAddresses(n.Status.Addresses)}
}

// sameLBNode reports whether have is what toLBNode makes of n; the two
// name the same fields.
func sameLBNode(have *abi.Node, n *v1.Node) bool {
	if have.UID != string(n.UID) || have.ProviderID != n.Spec.ProviderID || len(have.Addresses) != len(n.Status.Addresses) {
		return false
	}
	for i, a := range n.Status.Addresses {
		if have.Addresses[i] != (abi.NodeAddress{Type: string(a.Type), Address: a.Address}) {
			return false
		}
	}
	return true
}
