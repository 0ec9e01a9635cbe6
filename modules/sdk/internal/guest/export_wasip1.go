//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/wasmccm/wasmccm/abi"
)

// Export adapts a method body to the method export signature. By contract
// the host wrote the input into the buffer that the alloc export returned,
// so ptr must be that buffer's address; anything else is reported as an
// error instead of being dereferenced.
func Export(ptr, size uint32, method func(in []byte) []byte) uint64 {
	var out []byte
	if size > uint32(cap(input)) || (size > 0 && ptr != AddressOf(input[:1])) {
		endCall()
		out = encode(abi.Outcome{Status: abi.StatusError, Message: "guest: input not in the buffer returned by " + abi.ExportAlloc}, nil)
	} else {
		out = method(input[:size])
	}
	return abi.PackResult(AddressOf(out), uint32(len(out)))
}

// AddressOf returns the linear-memory address of b's first byte, or 0 for
// an empty slice.
func AddressOf(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}
