// Package loadbalancerlist adds the optional export that lists the load
// balancers a module made for the cluster (ABI revision 3), with which the
// host deletes those whose Service is gone. Import it together with
// export/loadbalancer: the host refuses a module that lists load balancers
// without the LoadBalancer capability.
package loadbalancerlist

import (
	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/internal/guest"
)

var impl sdk.LoadBalancerLister

// Set registers the implementation. Call it from an init function.
func Set(p sdk.LoadBalancerLister) { impl = p }

func listLoadBalancers(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(clusterName *abi.String) (abi.OwnedLoadBalancers, error) {
		return impl.ListLoadBalancers(guest.Context(), string(*clusterName))
	})
}
