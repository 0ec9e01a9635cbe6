// Package zones adds the Zones exports to a module.
package zones

import (
	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/internal/guest"
)

var impl sdk.Zones

// Set registers the implementation. Call it from an init function.
func Set(p sdk.Zones) { impl = p }

func getZone(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(*abi.Empty) (abi.Zone, error) {
		return impl.GetZone(guest.Context())
	})
}

func getZoneByProviderID(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(id *abi.String) (abi.Zone, error) {
		return impl.GetZoneByProviderID(guest.Context(), string(*id))
	})
}

func getZoneByNodeName(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(name *abi.String) (abi.Zone, error) {
		return impl.GetZoneByNodeName(guest.Context(), string(*name))
	})
}
