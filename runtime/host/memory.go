package host

import "github.com/tetratelabs/wazero/experimental"

// Guest linear memory is allocated by memoryAllocator, never by wazero's
// default, which keeps it in the Go heap and copies it on every
// memory.grow beyond its capacity: a guest growing to its cap then costs
// the host its old copies plus the collector's headroom (GOGC), several
// times the cap, and a closed instance's memory waits for a collection to
// be given back. Where the system can reserve address space (memory_mmap.go),
// each instance reserves its cap once, commits pages as the guest grows
// and unmaps them when it closes; elsewhere heapMemory keeps wazero's
// behaviour.
var memoryAllocator experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(allocateMemory)

// heapMemory is linear memory in the Go heap: the fallback where
// reservations are unavailable or fail.
type heapMemory struct{ buf []byte }

func newHeapMemory(capacity, max uint64) *heapMemory {
	return &heapMemory{buf: make([]byte, 0, min(capacity, max))}
}

func (h *heapMemory) Reallocate(size uint64) []byte {
	if n := uint64(len(h.buf)); size > n {
		h.buf = append(h.buf, make([]byte, size-n)...)
	}
	return h.buf[:size]
}

func (h *heapMemory) Free() { h.buf = nil }
