//go:build wasip1

//lint:file-ignore U1000 these functions are called by the host through //go:wasmexport.

package instancesv2

import "github.com/wasmccm/wasmccm/modules/sdk/internal/guest"

//go:wasmexport wasmccm_instance_exists
func exportInstanceExists(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, instanceExists)
}

//go:wasmexport wasmccm_instance_shutdown
func exportInstanceShutdown(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, instanceShutdown)
}

//go:wasmexport wasmccm_instance_metadata
func exportInstanceMetadata(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, instanceMetadata)
}
