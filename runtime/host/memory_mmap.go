//go:build linux || darwin || freebsd || netbsd || openbsd

package host

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// mmapMemory is linear memory in a private anonymous mapping of the
// instance's cap, reserved inaccessible (PROT_NONE, so it is not charged
// as committed memory) and made accessible page range by page range as the
// guest grows. Growth never moves or copies the memory, the Go collector
// never sees it, and Free returns every page to the system at once.
type mmapMemory struct {
	reserved  []byte // the whole reservation; only [:committed] is accessible
	committed uint64
}

func allocateMemory(capacity, max uint64) experimental.LinearMemory {
	if max == 0 || max > 1<<32 {
		return newHeapMemory(capacity, max)
	}
	reserved, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		// Address space is exhausted or limited (ulimit -v): the heap
		// still works, at the cost this file avoids.
		return newHeapMemory(capacity, max)
	}
	return &mmapMemory{reserved: reserved}
}

// Reallocate makes [0, size) accessible. wazero asks only for growth, in
// whole 64 KiB wasm pages, a multiple of every system page size; it
// returns nil, which the guest sees as memory.grow failing, when the
// system refuses to commit.
func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.reserved)) {
		return nil
	}
	if size > m.committed {
		if err := syscall.Mprotect(m.reserved[m.committed:size], syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
			return nil
		}
		m.committed = size
	}
	// The capacity stops at size so that nothing can append into the
	// inaccessible rest of the reservation.
	return m.reserved[:size:size]
}

// Free unmaps the memory. wazero calls it once, when the instance closes
// and no call is running on it.
func (m *mmapMemory) Free() {
	if m.reserved != nil {
		_ = syscall.Munmap(m.reserved)
		m.reserved, m.committed = nil, 0
	}
}
