package host

import (
	"bytes"
	"sync"
)

// liveInstances tracks every instance whose linear memory exists, for the
// tests that search guest memory for secrets (scanInstances). It is nil,
// and tracking costs nothing, unless a test build enables it: the package's
// own tests (export_test.go) and CCM binaries built with the
// wasmccm_memscan tag (memscan_hook.go).
var liveInstances *instanceSet

type instanceSet struct {
	mu sync.Mutex
	m  map[*instance]struct{}
}

func (s *instanceSet) add(i *instance) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.m[i] = struct{}{}
	s.mu.Unlock()
}

// remove runs before the instance's memory is released: a scan holding
// the lock finishes reading first.
func (s *instanceSet) remove(i *instance) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.m, i)
	s.mu.Unlock()
}

// memoryScan is what scanInstances found.
type memoryScan struct {
	Instances int   `json:"instances"`
	Bytes     int64 `json:"bytes"`
	// Matches counts the occurrences of the needle in all of them.
	Matches int `json:"matches"`
}

// scanInstances counts the occurrences of needle in the linear memory of
// every live instance of every module in the process.
func scanInstances(needle []byte) memoryScan {
	s := liveInstances
	s.mu.Lock()
	defer s.mu.Unlock()
	var scan memoryScan
	for i := range s.m {
		mem, _ := i.mem.Read(0, i.mem.Size())
		scan.Instances++
		scan.Bytes += int64(len(mem))
		scan.Matches += bytes.Count(mem, needle)
	}
	return scan
}
