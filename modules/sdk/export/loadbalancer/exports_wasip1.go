//go:build wasip1

//lint:file-ignore U1000 these functions are called by the host through //go:wasmexport.

package loadbalancer

import "github.com/wasmccm/wasmccm/modules/sdk/internal/guest"

//go:wasmexport wasmccm_get_load_balancer
func exportGetLoadBalancer(ptr, size uint32) uint64 { return guest.Export(ptr, size, getLoadBalancer) }

//go:wasmexport wasmccm_get_load_balancer_name
func exportGetLoadBalancerName(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, getLoadBalancerName)
}

//go:wasmexport wasmccm_ensure_load_balancer
func exportEnsureLoadBalancer(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, ensureLoadBalancer)
}

//go:wasmexport wasmccm_update_load_balancer
func exportUpdateLoadBalancer(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, updateLoadBalancer)
}

//go:wasmexport wasmccm_ensure_load_balancer_deleted
func exportEnsureLoadBalancerDeleted(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, ensureLoadBalancerDeleted)
}

//go:wasmexport wasmccm_set_load_balancer_nodes
func exportSetLoadBalancerNodes(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, setLoadBalancerNodes)
}
