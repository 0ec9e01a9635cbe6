// Package instancesv2 adds the InstancesV2 exports to a module. Linking it
// is what makes the host report the capability as supported.
package instancesv2

import (
	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/internal/guest"
)

var impl sdk.InstancesV2

// Set registers the implementation. Call it from an init function.
func Set(p sdk.InstancesV2) { impl = p }

func instanceExists(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(node *abi.Node) (abi.Bool, error) {
		ok, err := impl.InstanceExists(guest.Context(), node)
		return abi.Bool(ok), err
	})
}

func instanceShutdown(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(node *abi.Node) (abi.Bool, error) {
		ok, err := impl.InstanceShutdown(guest.Context(), node)
		return abi.Bool(ok), err
	})
}

func instanceMetadata(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(node *abi.Node) (abi.InstanceMetadata, error) {
		meta, err := impl.InstanceMetadata(guest.Context(), node)
		if meta == nil {
			return abi.InstanceMetadata{}, err
		}
		return *meta, err
	})
}
