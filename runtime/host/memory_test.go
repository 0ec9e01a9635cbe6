package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/experimental"
	"k8s.io/component-base/metrics/testutil"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
)

// growModule's InstanceExists grows its memory to the cap, writing every
// page, as a guest heap that keeps growing would.
var growModule = abiModule(wt.Seq(wt.GrowMemoryToLimit, okEmpty), nil)

// growFigures is what one run of growPool measured, in MiB and seconds.
type growFigures struct {
	BaselineMiB, PeakMiB, SettledMiB float64
	ReleaseSeconds                   float64
	Recycled                         float64
}

const mib = 1 << 20

// procStatus reads a field of /proc/self/status in bytes (VmRSS: what the
// process holds now; VmHWM: its peak since the last reset).
func procStatus(field string) (uint64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/self/status has no %s", field)
}

// growPool has 8 callers call growModule on a pool of 4 instances capped
// at 128 MiB, calls times each, then waits until the recycled instances
// are replaced and measures how long the process's RSS takes to be back
// under settleMiB (at most 10 s).
func growPool(tb testing.TB, calls int, settleMiB float64) growFigures {
	debug.FreeOSMemory()
	// Writing 5 to clear_refs resets VmHWM, so the peak is this run's.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Skip("cannot reset the peak RSS: ", err)
	}
	var fig growFigures
	rss, err := procStatus("VmRSS")
	if err != nil {
		tb.Skip(err)
	}
	fig.BaselineMiB = float64(rss) / mib
	mod, err := New(context.Background(), growModule, Config{Name: "grow", PoolSize: 4, CallTimeout: 30 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	defer mod.Close(context.Background())
	recycledBefore, _ := testutil.GetCounterMetricValue(instancesRecycled.WithLabelValues("grow"))

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range calls {
				if err := mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "n"}, nil); err != nil {
					tb.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// Every call grew its instance past the high-water mark, so each is
	// recycled once its call has returned.
	for deadline := time.Now().Add(10 * time.Second); fig.Recycled < float64(8*calls) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		recycled, _ := testutil.GetCounterMetricValue(instancesRecycled.WithLabelValues("grow"))
		fig.Recycled = recycled - recycledBefore
	}
	replaced := time.Now()
	for {
		rss, _ := procStatus("VmRSS")
		fig.SettledMiB = float64(rss) / mib
		fig.ReleaseSeconds = time.Since(replaced).Seconds()
		if fig.SettledMiB < settleMiB || fig.ReleaseSeconds > 10 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	peak, _ := procStatus("VmHWM")
	fig.PeakMiB = float64(peak) / mib
	return fig
}

// TestGuestMemoryBudget: four instances grown to their 128 MiB cap cost
// the host about 4 x 128 MiB, not a multiple of it, and the memory goes
// back to the system as soon as the instances are recycled. It runs in a
// child process, whose RSS is this scenario's alone.
func TestGuestMemoryBudget(t *testing.T) {
	if os.Getenv("WASMCCM_GROW_CHILD") != "" {
		fig := growPool(t, 2, 100)
		out, _ := json.Marshal(fig)
		fmt.Printf("FIGURES %s\n", out)
		return
	}
	if _, err := os.Stat("/proc/self/clear_refs"); err != nil {
		t.Skip("needs Linux's /proc: ", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGuestMemoryBudget$", "-test.count=1")
	cmd.Env = append(os.Environ(), "WASMCCM_GROW_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, line, ok := bytes.Cut(out, []byte("FIGURES "))
	var fig growFigures
	if !ok || json.Unmarshal(bytes.SplitN(line, []byte("\n"), 2)[0], &fig) != nil {
		t.Skipf("child measured nothing:\n%s", out)
	}
	t.Logf("RSS %.0f MiB before, %.0f MiB peak, %.0f MiB %.2f s after the instances were replaced; %v recycled",
		fig.BaselineMiB, fig.PeakMiB, fig.SettledMiB, fig.ReleaseSeconds, fig.Recycled)
	if fig.Recycled != 16 {
		t.Errorf("%v instances recycled after 16 calls that each grew one to the cap", fig.Recycled)
	}
	// The bound is 4 x 128 MiB + 100 MiB; the margin keeps it robust.
	if fig.PeakMiB > 4*128+80 {
		t.Errorf("peak RSS %.0f MiB, want at most 4 x 128 MiB + 80 MiB", fig.PeakMiB)
	}
	if fig.SettledMiB >= 100 || fig.ReleaseSeconds > 4 {
		t.Errorf("RSS %.0f MiB %.2f s after the instances were replaced, want under 100 MiB within 4 s", fig.SettledMiB, fig.ReleaseSeconds)
	}
}

// TestGarbageIsReclaimed: calls that each leave 6 MiB of garbage, 240 MiB
// in all on a module capped at 32 MiB, all succeed, and no instance the
// pool keeps is past its high-water mark. TinyGo modules are built without
// a collector (-gc=leaking, internal/wasmbuild), so for them recycling is
// what reclaims memory: with it turned off the same calls run out of
// memory. Standard Go modules collect their own garbage either way.
func TestGarbageIsReclaimed(t *testing.T) {
	const limitPages, calls = 512, 40 // 32 MiB; the mark is at most 8 MiB
	for _, tc := range toolchains(t) {
		for _, recycling := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/recycling=%v", tc, recycling), func(t *testing.T) {
				f := newFixture(t, tc, func(c *Config) {
					c.PoolSize = 1
					c.MemoryLimitPages = limitPages
					if !recycling {
						c.RecycleAbovePages = limitPages
					}
				})
				var err error
				for i := 0; i < calls && err == nil; i++ {
					err = f.mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "garbage-6"}, new(abi.Bool))
					f.mod.pool.mu.Lock()
					for _, inst := range f.mod.pool.idle {
						if size := uint64(inst.mem.Size()); recycling && size > inst.recycleAbove {
							t.Errorf("call %d: the pool kept an instance of %d MiB, past its %d MiB mark", i, size>>20, inst.recycleAbove>>20)
						}
					}
					f.mod.pool.mu.Unlock()
				}
				var failure *FailureError
				switch {
				case recycling || tc == wasmbuild.Go:
					if err != nil {
						t.Fatalf("%d calls of 6 MiB each on a 32 MiB module: %v", calls, err)
					}
				case !errors.As(err, &failure) || failure.Reason != ReasonTrap:
					t.Fatalf("without recycling, a module without a collector served %d calls of 6 MiB each on 32 MiB (err = %v); the test no longer shows what recycling does", calls, err)
				}
			})
		}
	}
}

// BenchmarkGuestMemory reports the figures of TestGuestMemoryBudget, with
// the host's allocator and with wazero's default (linear memory in the Go
// heap) for comparison. Run each alone (-benchtime=1x): the peak is the
// process's.
func BenchmarkGuestMemory(b *testing.B) {
	for _, tc := range []struct {
		name      string
		allocator experimental.MemoryAllocator
	}{{"mmap", memoryAllocator}, {"go-heap", nil}} {
		b.Run("allocator="+tc.name, func(b *testing.B) {
			defer func(saved experimental.MemoryAllocator) { memoryAllocator = saved }(memoryAllocator)
			memoryAllocator = tc.allocator
			var fig growFigures
			for b.Loop() {
				fig = growPool(b, 2, 100)
			}
			b.ReportMetric(fig.BaselineMiB, "baseline-MiB")
			b.ReportMetric(fig.PeakMiB, "peak-rss-MiB")
			b.ReportMetric(fig.SettledMiB, "settled-rss-MiB")
			b.ReportMetric(fig.ReleaseSeconds, "release-s")
		})
	}
}

func TestRecycleMark(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		name                  string
		limit, recycle        uint32 // pages
		initBytes, held, want uint64 // held: a Node list's memory (recycleMarkHolding)
	}{
		{"configured mark wins", 2048, 160, 3 * MiB, 0, 10 * MiB},
		{"collected heap: eight times its start", 2048, 0, 3648 << 10, 0, 8 * (3648 << 10)},
		{"small start: the floor", 2048, 0, 128 << 10, 0, recycleFloorBytes},
		{"large start: a quarter of the cap", 2048, 0, 20 * MiB, 0, 32 * MiB},
		{"small cap: a quarter of it, under the floor", 128, 0, 128 << 10, 0, 2 * MiB},
		{"a small Node list: up by what it took", 2048, 0, 256 << 10, 768 << 10, recycleFloorBytes + 768<<10},
		{"a large Node list: twice what the instance holds", 2048, 0, 256 << 10, 7936 << 10, 16 * MiB},
		{"a Node list, up to a quarter of the cap", 2048, 0, 20 * MiB, 5 * MiB, 32 * MiB},
		{"a Node list, configured mark stays", 2048, 160, 3 * MiB, 5 * MiB, 10 * MiB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{MemoryLimitPages: tc.limit, RecycleAbovePages: tc.recycle}.withDefaults()
			got := cfg.recycleMark(tc.initBytes)
			if tc.held != 0 {
				got = cfg.recycleMarkHolding(tc.initBytes, tc.held)
			}
			if got != tc.want {
				t.Errorf("mark of %d bytes after init, %d held = %d, want %d", tc.initBytes, tc.held, got, tc.want)
			}
		})
	}
}
