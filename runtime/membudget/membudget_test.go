package membudget

import (
	"strconv"
	"strings"
	"testing"

	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/membudget/membudgettest"
)

const (
	v2Self = "0::/kubepods/pod1/ccm\n"
	v1Self = "12:cpu,cpuacct:/kubepods/pod1/ccm\n4:memory:/kubepods/pod1/ccm\n0::/\n"
)

// recordGoMemoryLimit replaces setGoMemoryLimit for the test and returns
// the last soft limit set, in MiB, 0 when none was.
func recordGoMemoryLimit(t *testing.T) *int64 {
	var mib int64
	saved := setGoMemoryLimit
	setGoMemoryLimit = func(limit int64) int64 { mib = limit >> 20; return 0 }
	t.Cleanup(func() { setGoMemoryLimit = saved })
	return &mib
}

// limits are the cloud-config's limits.poolSize, limits.memoryLimitMiB
// and limits.fitPoolToMemory.
type limits struct {
	poolSize, memoryLimitMiB int
	fit                      bool
}

// TestMemoryBudget: the budget is checked against the limit of the
// process's own cgroup, v1 or v2, and a configuration that does not fit is
// refused with the numbers and the fix, or fitted when asked to; one that
// fits sets the Go soft memory limit to what the instances leave.
func TestMemoryBudget(t *testing.T) {
	mib := func(n int) string { return itoa(n << 20) }
	const stack = host.DefaultStackLimitBytes >> 20 // each instance's call stack, beside its memory
	cases := []struct {
		name        string
		files       map[string]string
		limits      limits
		copies      int
		wantErr     string
		wantPool    int
		wantSoftMiB int64
	}{
		{"v2, fits", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/kubepods/pod1/ccm/memory.max": mib(256)},
			limits{poolSize: 2, memoryLimitMiB: 64}, 1, "", 2, 256 - 2*(64+stack) - 8},
		{"v2, fits with reload", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/kubepods/pod1/ccm/memory.max": mib(288)},
			limits{poolSize: 2, memoryLimitMiB: 32}, 2, "", 2, 288 - 2*(2*(32+stack)+8)},
		{"v2, defaults over the limit", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/kubepods/pod1/ccm/memory.max": mib(256)},
			limits{}, 1,
			"memory budget: (limits.poolSize 4 x (limits.memoryLimitMiB 128 + limits.stackLimitMiB 8) + limits.sharedStateMiB 8) + 100 MiB for the manager = 652 MiB, over the container's memory limit of 256 MiB", 0, 0},
		{"v2, reload doubles the instances", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/kubepods/pod1/ccm/memory.max": mib(256)},
			limits{poolSize: 2, memoryLimitMiB: 64}, 2,
			"(limits.poolSize 2 x (limits.memoryLimitMiB 64 + limits.stackLimitMiB 8) + limits.sharedStateMiB 8) x 2 (old and new module overlap during a reload) + 100 MiB for the manager = 404 MiB", 0, 0},
		{"v2, a parent's limit is lower", map[string]string{"proc/self/cgroup": v2Self,
			"sys/fs/cgroup/kubepods/pod1/ccm/memory.max": "max", "sys/fs/cgroup/kubepods/memory.max": mib(200)},
			limits{poolSize: 2, memoryLimitMiB: 64}, 1, "raise the container's memory limit to at least 252Mi", 0, 0},
		{"v2 namespaced: the root is the container's", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": mib(128)},
			limits{poolSize: 1, memoryLimitMiB: 64}, 1, "over the container's memory limit of 128 MiB", 0, 0},
		{"v2, no limit", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/kubepods/pod1/ccm/memory.max": "max"},
			limits{poolSize: 256, memoryLimitMiB: 4096}, 1, "", 256, 0},
		{"v1, over the limit", map[string]string{"proc/self/cgroup": v1Self, "sys/fs/cgroup/memory/kubepods/pod1/ccm/memory.limit_in_bytes": mib(300)},
			limits{poolSize: 4, memoryLimitMiB: 64}, 1, "396 MiB, over the container's memory limit of 300 MiB", 0, 0},
		{"v1 in a container: path absent, mount root read", map[string]string{"proc/self/cgroup": v1Self, "sys/fs/cgroup/memory/memory.limit_in_bytes": mib(400)},
			limits{poolSize: 4, memoryLimitMiB: 64}, 1, "", 4, 400 - 4*(64+stack) - 8},
		{"v1, unlimited", map[string]string{"proc/self/cgroup": v1Self, "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"},
			limits{}, 1, "", 4, 0},
		{"fitted to the limit", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/memory.max": mib(400)},
			limits{poolSize: 8, memoryLimitMiB: 64, fit: true}, 1, "", 4, 400 - 4*(64+stack) - 8},
		{"fitting cannot go below one instance", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/memory.max": mib(150)},
			limits{poolSize: 8, memoryLimitMiB: 64, fit: true}, 1, "at least 684Mi", 0, 0},
		{"no cgroup at all", map[string]string{}, limits{}, 1, "", 4, 0},
		{"malformed limit", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/memory.max": "lots"},
			limits{}, 1, "reading the container's memory limit", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := membudgettest.Cgroups(t, tc.files)
			soft := recordGoMemoryLimit(t)
			b, err := Apply(New(tc.limits.poolSize, tc.limits.memoryLimitMiB, 0, 0, tc.copies), tc.limits.fit, root)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if b.PoolSize != tc.wantPool {
					t.Fatalf("poolSize = %d, want %d", b.PoolSize, tc.wantPool)
				}
				if *soft != tc.wantSoftMiB {
					t.Fatalf("Go soft memory limit %d MiB, want %d MiB (0: not set)", *soft, tc.wantSoftMiB)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.wantErr)
			}
			if *soft != 0 {
				t.Fatalf("a refused configuration set the Go soft memory limit to %d MiB", *soft)
			}
		})
	}
}

// TestGOMEMLIMITWins: an operator's GOMEMLIMIT is left alone.
func TestGOMEMLIMITWins(t *testing.T) {
	root := membudgettest.Cgroups(t, map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/memory.max": itoa(256 << 20)})
	t.Setenv("GOMEMLIMIT", "150MiB")
	soft := recordGoMemoryLimit(t)
	if _, err := Apply(New(1, 32, 0, 0, 1), false, root); err != nil {
		t.Fatal(err)
	}
	if *soft != 0 {
		t.Fatalf("the Go soft memory limit was set to %d MiB over GOMEMLIMIT", *soft)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestFit: the decision alone, on budgets whose limit is known.
func TestFit(t *testing.T) {
	cases := []struct {
		name     string
		budget   Budget
		fitPool  bool
		wantPool int
		wantErr  bool
	}{
		{"fits", Budget{PoolSize: 4, MemoryLimitMiB: 64, SharedStateMiB: 8, Copies: 1, LimitMiB: 364}, false, 4, false},
		{"one MiB short", Budget{PoolSize: 4, MemoryLimitMiB: 64, SharedStateMiB: 8, Copies: 1, LimitMiB: 363}, false, 4, true},
		{"lowered to fit", Budget{PoolSize: 4, MemoryLimitMiB: 64, SharedStateMiB: 8, Copies: 1, LimitMiB: 363}, true, 3, false},
		{"two copies lowered", Budget{PoolSize: 4, MemoryLimitMiB: 64, SharedStateMiB: 8, Copies: 2, LimitMiB: 400}, true, 2, false},
		{"not even one instance", Budget{PoolSize: 4, MemoryLimitMiB: 64, SharedStateMiB: 8, Copies: 1, LimitMiB: 171}, true, 4, true},
		// Several modules (runtime/assembly): the others' worst case
		// shares the limit.
		{"fits alone, not beside another module", Budget{PoolSize: 4, MemoryLimitMiB: 64, SharedStateMiB: 8, Copies: 1, OtherModulesMiB: 100, LimitMiB: 364}, false, 4, true},
		{"lowered to fit beside another module", Budget{PoolSize: 4, MemoryLimitMiB: 64, SharedStateMiB: 8, Copies: 1, OtherModulesMiB: 100, LimitMiB: 400}, true, 3, false},
		{"the other module leaves no room", Budget{PoolSize: 4, MemoryLimitMiB: 64, SharedStateMiB: 8, Copies: 1, OtherModulesMiB: 300, LimitMiB: 400}, true, 4, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Fit(tc.budget, tc.fitPool)
			if (err != nil) != tc.wantErr || got.PoolSize != tc.wantPool {
				t.Fatalf("Fit = pool %d, %v; want pool %d, error %v", got.PoolSize, err, tc.wantPool, tc.wantErr)
			}
		})
	}
}
