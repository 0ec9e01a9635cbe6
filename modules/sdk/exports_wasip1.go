//go:build wasip1

//lint:file-ignore U1000 these functions are called by the host through //go:wasmexport.

package sdk

import (
	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk/internal/guest"
)

//go:wasmexport wasmccm_abi_version
func exportABIVersion() int32 { return abi.Version }

//go:wasmexport wasmccm_alloc
func exportAlloc(size uint32) uint32 { return guest.AddressOf(guest.Input(size)) }

//go:wasmexport wasmccm_init
func exportInit(ptr, size uint32) uint64 { return guest.Export(ptr, size, initialize) }
