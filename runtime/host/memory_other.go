//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package host

import "github.com/tetratelabs/wazero/experimental"

func allocateMemory(capacity, max uint64) experimental.LinearMemory {
	return newHeapMemory(capacity, max)
}
