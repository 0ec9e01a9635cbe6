//go:build wasip1

//lint:file-ignore U1000 these functions are called by the host through //go:wasmexport.

package loadbalancerlist

import "github.com/wasmccm/wasmccm/modules/sdk/internal/guest"

//go:wasmexport wasmccm_list_load_balancers
func exportListLoadBalancers(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, listLoadBalancers)
}
