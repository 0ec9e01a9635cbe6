//go:build wasip1

//lint:file-ignore U1000 these functions are called by the host through //go:wasmexport.

package instances

import "github.com/wasmccm/wasmccm/modules/sdk/internal/guest"

//go:wasmexport wasmccm_node_addresses
func exportNodeAddresses(ptr, size uint32) uint64 { return guest.Export(ptr, size, nodeAddresses) }

//go:wasmexport wasmccm_node_addresses_by_provider_id
func exportNodeAddressesByProviderID(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, nodeAddressesByProviderID)
}

//go:wasmexport wasmccm_instance_id
func exportInstanceID(ptr, size uint32) uint64 { return guest.Export(ptr, size, instanceID) }

//go:wasmexport wasmccm_instance_type
func exportInstanceType(ptr, size uint32) uint64 { return guest.Export(ptr, size, instanceType) }

//go:wasmexport wasmccm_instance_type_by_provider_id
func exportInstanceTypeByProviderID(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, instanceTypeByProviderID)
}

//go:wasmexport wasmccm_instance_exists_by_provider_id
func exportInstanceExistsByProviderID(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, instanceExistsByProviderID)
}

//go:wasmexport wasmccm_instance_shutdown_by_provider_id
func exportInstanceShutdownByProviderID(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, instanceShutdownByProviderID)
}

//go:wasmexport wasmccm_current_node_name
func exportCurrentNodeName(ptr, size uint32) uint64 { return guest.Export(ptr, size, currentNodeName) }
