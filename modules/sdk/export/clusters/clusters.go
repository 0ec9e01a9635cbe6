// Package clusters adds the Clusters exports to a module.
package clusters

import (
	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/internal/guest"
)

var impl sdk.Clusters

// Set registers the implementation. Call it from an init function.
func Set(p sdk.Clusters) { impl = p }

func listClusters(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(*abi.Empty) (abi.Strings, error) {
		return impl.ListClusters(guest.Context())
	})
}

func clusterMaster(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(name *abi.String) (abi.String, error) {
		master, err := impl.Master(guest.Context(), string(*name))
		return abi.String(master), err
	})
}
