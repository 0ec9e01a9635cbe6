//go:build gc.leaking

package guest

import "github.com/wasmccm/wasmccm/abi"

// unmarshal decodes a request. A leaking heap frees nothing, so strings
// sharing one copy of the input keep nothing alive that would otherwise be
// freed, and save an allocation each.
var unmarshal = abi.UnmarshalShared
