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

func ensureLoadBalancer(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(r *abi.LoadBalancerRequest) (abi.LoadBalancerStatus, error) {
		status, err := impl.EnsureLoadBalancer(guest.Context(), r.ClusterName, &r.Service, r.Nodes)
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
		return abi.Empty{}, impl.UpdateLoadBalancer(guest.Context(), r.ClusterName, &r.Service, r.Nodes)
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
