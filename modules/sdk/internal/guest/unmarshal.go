//go:build !gc.leaking

package guest

import "github.com/wasmccm/wasmccm/abi"

// unmarshal decodes a request. Under a collector, strings are copied one by
// one: a string a provider keeps must not keep the whole input alive.
var unmarshal = abi.Unmarshal
