//go:build linux

package host

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmccm/wasmccm/abi"
)

// BenchmarkSnapshotFill is the largest transient a module makes at scale:
// one InstanceMetadata call that fills simcloud's instance snapshot from
// one listing of every instance (GET /v1/instances), as the node
// controller's periodic pass does once the snapshot is older than its
// max age. Each call starts from a fresh instance and an empty shared
// state.
//
// guest-bytes/op is how much the instance's linear memory grew during
// the call, guest-resident-bytes/op how much of it the guest touched,
// which is what the process's resident memory grows by: the host maps
// linear memory untouched, and a heap grows by doubling but is written
// only where it allocates. A module built without a collector (TinyGo,
// -gc=leaking) keeps every byte it allocated until the instance is
// recycled. B/op is the host's, the simulated cloud's answer included.
//
// Run it with
//
//	go test ./runtime/host -run '^$' -bench BenchmarkSnapshotFill -benchmem -count 3
func BenchmarkSnapshotFill(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 5000} {
		for _, tc := range toolchains(b) {
			b.Run(fmt.Sprintf("instances=%d/%s", n, tc), func(b *testing.B) {
				// One instance, never recycled by the call, so that its
				// memory can be read after it.
				m := startSimcloudModule(b, tc, n, Config{PoolSize: 1, RecycleAbovePages: 1024})
				node := stageNode(stageNodeName(n / 2))
				var meta abi.InstanceMetadata
				var grown, resident uint64
				b.ReportAllocs()
				acquire := func() *instance {
					inst, err := m.pool.acquire(ctx, nodeListAffinity{})
					if err != nil {
						b.Fatal(err)
					}
					return inst
				}
				for b.Loop() {
					b.StopTimer()
					m.ClearState()
					m.recycle(acquire()) // a fresh instance, back in the pool
					inst := acquire()
					readyResident := residentBytes(b, inst.mem)
					m.pool.release(inst, inst.idleSince)
					b.StartTimer()
					if err := m.Call(ctx, abi.ExportInstanceMetadata, node, &meta); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					inst = acquire()
					grown += uint64(inst.mem.Size()) - inst.readyBytes
					resident += residentBytes(b, inst.mem) - readyResident
					m.pool.release(inst, inst.idleSince)
					b.StartTimer()
				}
				b.ReportMetric(float64(grown)/float64(b.N), "guest-bytes/op")
				b.ReportMetric(float64(resident)/float64(b.N), "guest-resident-bytes/op")
			})
		}
	}
}

// residentBytes is how much of mem is in the process's resident memory.
func residentBytes(b *testing.B, mem api.Memory) uint64 {
	buf, ok := mem.Read(0, mem.Size())
	if !ok || len(buf) == 0 {
		return 0
	}
	page := os.Getpagesize()
	vec := make([]byte, (len(buf)+page-1)/page)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		b.Fatal("mincore: ", errno)
	}
	var n uint64
	for _, v := range vec {
		n += uint64(v & 1)
	}
	return n * uint64(page)
}
