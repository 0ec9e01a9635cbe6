// Package loadbalancer adds the LoadBalancer exports to a module.
package loadbalancer

import (
	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/internal/guest"
)

var impl sdk.LoadBalancer

// Set registers the implementation. Call it from an init function.
func Set(p sdk.LoadBalancer) { impl = p }

func getLoadBalancer(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(r *abi.LoadBalancerRequest) (abi.GetLoadBalancerResult, error) {
		status, exists, err := impl.GetLoadBalancer(guest.Context(), r.ClusterName, &r.Service)
		res := abi.GetLoadBalancerResult{Exists: exists}
		if status != nil {
			res.Status = *status
		}
		return res, err
	})
}

func getLoadBalancerName(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(r *abi.LoadBalancerRequest) (abi.String, error) {
		return abi.String(impl.GetLoadBalancerName(guest.Context(), r.ClusterName, &r.Service)), nil
	})
}

// held is the Node list the host sent last through
// wasmccm_set_load_balancer_nodes (ABI revision 6). A host that sends one
// sends the calls that list Nodes without them, and they are answered with
// it; an older host sends none and lists Nodes in every call. Keeping the
// list also hands the provider the same slice until it changes, so that it
// may keep what it derives from the list (abi.SameNodes).
var held struct {
	nodes []abi.Node
	set   bool
}

func setLoadBalancerNodes(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(r *abi.LoadBalancerNodes) (abi.Empty, error) {
		held.nodes, held.set = r.Nodes, true
		return abi.Empty{}, nil
	})
}

// nodesOf is the Node list of a call that lists Nodes.
func nodesOf(r *abi.LoadBalancerRequest) []abi.Node {
	if held.set && len(r.Nodes) == 0 {
		return held.nodes
	}
	return r.Nodes
}

func ensureLoadBalancer(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(r *abi.LoadBalancerRequest) (abi.LoadBalancerStatus, error) {
		status, err := impl.EnsureLoadBalancer(guest.Context(), r.ClusterName, &r.Service, nodesOf(r))
		if err == nil && status == nil {
			// Upstream treats a nil status as an error; say so here, where the
			// author can see which method produced it.
			return abi.LoadBalancerStatus{}, errNilStatus
		}
		if status == nil {
			return abi.LoadBalancerStatus{}, err
		}
		return *status, err
	})
}

func updateLoadBalancer(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(r *abi.LoadBalancerRequest) (abi.Empty, error) {
		return abi.Empty{}, impl.UpdateLoadBalancer(guest.Context(), r.ClusterName, &r.Service, nodesOf(r))
	})
}

func ensureLoadBalancerDeleted(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(r *abi.LoadBalancerRequest) (abi.Empty, error) {
		return abi.Empty{}, impl.EnsureLoadBalancerDeleted(guest.Context(), r.ClusterName, &r.Service)
	})
}

type constError string

func (e constError) Error() string { return string(e) }

const errNilStatus = constError("EnsureLoadBalancer returned neither a status nor an error")
