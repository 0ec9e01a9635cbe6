//go:build wasip1

//lint:file-ignore U1000 these functions are called by the host through //go:wasmexport.

package zones

import "github.com/wasmccm/wasmccm/modules/sdk/internal/guest"

//go:wasmexport wasmccm_get_zone
func exportGetZone(ptr, size uint32) uint64 { return guest.Export(ptr, size, getZone) }

//go:wasmexport wasmccm_get_zone_by_provider_id
func exportGetZoneByProviderID(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, getZoneByProviderID)
}

//go:wasmexport wasmccm_get_zone_by_node_name
func exportGetZoneByNodeName(ptr, size uint32) uint64 {
	return guest.Export(ptr, size, getZoneByNodeName)
}
