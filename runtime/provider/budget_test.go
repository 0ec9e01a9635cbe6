package provider

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeCgroups lays out files under a temporary root as /proc and /sys show
// them, and points cgroupRoot at it for the test.
func fakeCgroups(t *testing.T, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	saved := cgroupRoot
	cgroupRoot = root
	t.Cleanup(func() { cgroupRoot = saved })
}

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

// TestMemoryBudget: the budget is checked against the limit of the
// process's own cgroup, v1 or v2, and a configuration that does not fit is
// refused with the numbers and the fix, or fitted when asked to; one that
// fits sets the Go soft memory limit to what the instances leave.
func TestMemoryBudget(t *testing.T) {
	mib := func(n int) string { return itoa(n << 20) }
	cases := []struct {
		name        string
		files       map[string]string
		limits      LimitsConfig
		reload      bool
		wantErr     string
		wantPool    int
		wantSoftMiB int64
	}{
		{"v2, fits", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/kubepods/pod1/ccm/memory.max": mib(256)},
			LimitsConfig{PoolSize: 2, MemoryLimitMiB: 64}, false, "", 2, 256 - 2*64 - 8},
		{"v2, fits with reload", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/kubepods/pod1/ccm/memory.max": mib(256)},
			LimitsConfig{PoolSize: 2, MemoryLimitMiB: 32}, true, "", 2, 256 - 2*(2*32+8)},
		{"v2, defaults over the limit", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/kubepods/pod1/ccm/memory.max": mib(256)},
			LimitsConfig{}, false,
			"memory budget: (limits.poolSize 4 x limits.memoryLimitMiB 128 + limits.sharedStateMiB 8) + 100 MiB for the manager = 620 MiB, over the container's memory limit of 256 MiB", 0, 0},
		{"v2, reload doubles the instances", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/kubepods/pod1/ccm/memory.max": mib(256)},
			LimitsConfig{PoolSize: 2, MemoryLimitMiB: 64}, true,
			"(limits.poolSize 2 x limits.memoryLimitMiB 64 + limits.sharedStateMiB 8) x 2 (old and new module overlap during a reload) + 100 MiB for the manager = 372 MiB", 0, 0},
		{"v2, a parent's limit is lower", map[string]string{"proc/self/cgroup": v2Self,
			"sys/fs/cgroup/kubepods/pod1/ccm/memory.max": "max", "sys/fs/cgroup/kubepods/memory.max": mib(200)},
			LimitsConfig{PoolSize: 2, MemoryLimitMiB: 64}, false, "raise the container's memory limit to at least 236Mi", 0, 0},
		{"v2 namespaced: the root is the container's", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": mib(128)},
			LimitsConfig{PoolSize: 1, MemoryLimitMiB: 64}, false, "over the container's memory limit of 128 MiB", 0, 0},
		{"v2, no limit", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/kubepods/pod1/ccm/memory.max": "max"},
			LimitsConfig{PoolSize: 256, MemoryLimitMiB: 4096}, false, "", 256, 0},
		{"v1, over the limit", map[string]string{"proc/self/cgroup": v1Self, "sys/fs/cgroup/memory/kubepods/pod1/ccm/memory.limit_in_bytes": mib(300)},
			LimitsConfig{PoolSize: 4, MemoryLimitMiB: 64}, false, "364 MiB, over the container's memory limit of 300 MiB", 0, 0},
		{"v1 in a container: path absent, mount root read", map[string]string{"proc/self/cgroup": v1Self, "sys/fs/cgroup/memory/memory.limit_in_bytes": mib(400)},
			LimitsConfig{PoolSize: 4, MemoryLimitMiB: 64}, false, "", 4, 400 - 4*64 - 8},
		{"v1, unlimited", map[string]string{"proc/self/cgroup": v1Self, "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"},
			LimitsConfig{}, false, "", 0, 0},
		{"fitted to the limit", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/memory.max": mib(400)},
			LimitsConfig{PoolSize: 8, MemoryLimitMiB: 64, FitPoolToMemory: true}, false, "", 4, 400 - 4*64 - 8},
		{"fitting cannot go below one instance", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/memory.max": mib(150)},
			LimitsConfig{PoolSize: 8, MemoryLimitMiB: 64, FitPoolToMemory: true}, false, "at least 620Mi", 0, 0},
		{"no cgroup at all", map[string]string{}, LimitsConfig{}, false, "", 0, 0},
		{"malformed limit", map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/memory.max": "lots"},
			LimitsConfig{}, false, "reading the container's memory limit", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fakeCgroups(t, tc.files)
			soft := recordGoMemoryLimit(t)
			cfg := &Config{Limits: tc.limits}
			if tc.reload {
				cfg.Module.ReloadInterval = metav1.Duration{Duration: time.Second}
			}
			err := applyMemoryBudget(cfg, cfg.Module.ReloadInterval.Duration > 0)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Limits.PoolSize != tc.wantPool {
					t.Fatalf("poolSize = %d, want %d", cfg.Limits.PoolSize, tc.wantPool)
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
	fakeCgroups(t, map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/memory.max": itoa(256 << 20)})
	t.Setenv("GOMEMLIMIT", "150MiB")
	soft := recordGoMemoryLimit(t)
	if err := applyMemoryBudget(&Config{Limits: LimitsConfig{PoolSize: 1, MemoryLimitMiB: 32}}, false); err != nil {
		t.Fatal(err)
	}
	if *soft != 0 {
		t.Fatalf("the Go soft memory limit was set to %d MiB over GOMEMLIMIT", *soft)
	}
}

// TestMemoryBudgetRefusesStart: the CCM's provider refuses to start, before
// it reads the module, when its budget exceeds the cgroup's limit.
func TestMemoryBudgetRefusesStart(t *testing.T) {
	fakeCgroups(t, map[string]string{"proc/self/cgroup": v2Self, "sys/fs/cgroup/memory.max": itoa(256 << 20)})
	cfg := &Config{Module: ModuleConfig{Path: filepath.Join(t.TempDir(), "absent.wasm")}}
	_, err := New(context.Background(), cfg)
	want := "memory budget: (limits.poolSize 4 x limits.memoryLimitMiB 128 + limits.sharedStateMiB 8) + 100 MiB for the manager = 620 MiB, " +
		"over the container's memory limit of 256 MiB"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to contain %q", err, want)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
