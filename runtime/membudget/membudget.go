// Package membudget holds the memory budget of a wasmccm manager: what its
// module instances and its own heap may cost at most against the
// container's memory limit. It reads that limit from the process's cgroup
// (v1 or v2), decides whether a configuration fits, lowering the pool
// size when asked to (Fit, a pure decision), and sets the Go runtime's
// soft memory limit to the manager's share (Apply, the side effects).
package membudget

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/host"
)

// HostBaselineMiB is the manager's own memory next to its module
// instances: informer caches, controllers, compiled code. The native
// baseline CCM peaked at 83–97 MiB with 1,000 Nodes and 200 LoadBalancer
// Services; after start-up the CCM held 62–66 MiB with the TinyGo-built
// module and 94–103 MiB with the standard-Go one, whose compiled code is
// 16 MiB (BENCHMARKS.md). 100 MiB covers the native peak and a TinyGo
// module with little to spare; a standard-Go module or a larger cluster
// needs the memory limit raised by its compiled code or by what the
// informers hold.
const HostBaselineMiB = 100

// Defaults of the cloud-config's limits, the same as runtime/host's.
const (
	defaultPoolSize       = 4
	defaultMemoryLimitMiB = 128
)

// setGoMemoryLimit is debug.SetMemoryLimit; tests record the call instead.
var setGoMemoryLimit = debug.SetMemoryLimit

// Budget is what the configuration may cost at most against the
// container's memory limit.
type Budget struct {
	PoolSize, MemoryLimitMiB int
	// StackLimitMiB is what each instance's call stack may take, beside
	// its linear memory.
	StackLimitMiB int
	// SharedStateMiB is each copy's shared state, at its bound.
	SharedStateMiB int
	// Copies is 2 when hot reload or the last-known-good record is on: a
	// new module's instances run beside the old one's, in shadow and while
	// the old one's finish their calls.
	Copies int
	// OtherModulesMiB is what the process's other modules may cost at
	// most, when a CCM serves several (runtime/assembly): they share
	// the container's limit.
	OtherModulesMiB int
	// LimitMiB is the cgroup's limit, 0 when there is none; LimitFile
	// says where it was read.
	LimitMiB  int
	LimitFile string
}

// New returns the budget of copies of a module with the cloud-config's
// limits (limits.poolSize, limits.memoryLimitMiB, limits.stackLimitMiB,
// limits.sharedStateMiB), zero ones taking runtime/host's defaults.
func New(poolSize, memoryLimitMiB, stackLimitMiB, sharedStateMiB, copies int) Budget {
	return Budget{
		PoolSize:       orDefault(poolSize, defaultPoolSize),
		MemoryLimitMiB: orDefault(memoryLimitMiB, defaultMemoryLimitMiB),
		StackLimitMiB:  orDefault(stackLimitMiB, host.DefaultStackLimitBytes>>20),
		SharedStateMiB: orDefault(sharedStateMiB, host.DefaultSharedStateBytes>>20),
		Copies:         copies,
	}
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// NeedMiB is the worst case: every instance of every copy at its cap, and
// the manager itself.
func (b Budget) NeedMiB() int {
	return HostBaselineMiB + b.modulesMiB()
}

// HostShareMiB is what the limit leaves the manager once every instance
// of every copy is at its cap.
func (b Budget) HostShareMiB() int {
	return b.LimitMiB - b.modulesMiB()
}

// modulesMiB is every instance of every copy at its cap, linear memory
// and call stack, every copy's shared state at its bound, and the other
// modules' worst case.
func (b Budget) modulesMiB() int {
	return b.Copies*(b.PoolSize*b.instanceMiB()+b.SharedStateMiB) + b.OtherModulesMiB
}

// instanceMiB is what one instance may take: its linear memory and its
// call stack.
func (b Budget) instanceMiB() int { return b.MemoryLimitMiB + b.StackLimitMiB }

// ModuleMiB is this module's worst case alone: what it adds to the other
// modules' budgets.
func (b Budget) ModuleMiB() int { return b.modulesMiB() - b.OtherModulesMiB }

func (b Budget) String() string {
	copies := ""
	if b.Copies > 1 {
		copies = fmt.Sprintf(" x %d (old and new module overlap during a reload)", b.Copies)
	}
	others := ""
	if b.OtherModulesMiB > 0 {
		others = fmt.Sprintf(" + %d MiB for the other modules", b.OtherModulesMiB)
	}
	return fmt.Sprintf("(limits.poolSize %d x (limits.memoryLimitMiB %d + limits.stackLimitMiB %d) + limits.sharedStateMiB %d)%s%s + %d MiB for the manager = %d MiB",
		b.PoolSize, b.MemoryLimitMiB, b.StackLimitMiB, b.SharedStateMiB, copies, others, HostBaselineMiB, b.NeedMiB())
}

// Fit decides whether b fits its LimitMiB, which must be set: it returns
// b when it does, b with the pool lowered to what fits when fitPool
// allows it (down to one instance), and otherwise an error with the
// numbers and the fixes.
func Fit(b Budget, fitPool bool) (Budget, error) {
	if b.NeedMiB() <= b.LimitMiB {
		return b, nil
	}
	fit := ((b.LimitMiB-HostBaselineMiB-b.OtherModulesMiB)/b.Copies - b.SharedStateMiB) / b.instanceMiB()
	if !fitPool || fit < 1 {
		return b, fmt.Errorf("memory budget: %s, over the container's memory limit of %d MiB (%s); "+
			"lower limits.poolSize, limits.memoryLimitMiB or limits.stackLimitMiB, raise the container's memory limit to at least %dMi, "+
			"or set limits.fitPoolToMemory to lower the pool size to what fits",
			b, b.LimitMiB, b.LimitFile, b.NeedMiB())
	}
	b.PoolSize = fit
	return b, nil
}

// Apply checks b against the memory limit of the process's cgroup, read
// under cgroupRoot (where /proc and /sys are; "/" but in tests), and
// returns the budget to run with: b, or b with a lower pool size (Fit). A
// configuration that does not fit is refused, since reaching the limit
// gets the whole manager OOM-killed, every controller with it. One that
// fits sets the Go runtime's soft memory limit to the manager's share (see
// limitGoMemory). Without a limit nothing is checked.
func Apply(b Budget, fitPool bool, cgroupRoot string) (Budget, error) {
	limit, file, err := cgroupMemoryLimit(cgroupRoot)
	if err != nil {
		return b, fmt.Errorf("memory budget: reading the container's memory limit: %w", err)
	}
	if limit == 0 {
		klog.V(2).InfoS("no container memory limit found; the memory budget is not checked", "budget", b.String())
		return b, nil
	}
	b.LimitMiB, b.LimitFile = int(min(limit>>20, 1<<40)), file
	fitted, err := Fit(b, fitPool)
	if err != nil {
		return b, err
	}
	if fitted.PoolSize != b.PoolSize {
		klog.InfoS("lowering the module pool size to fit the container's memory limit",
			"from", b.PoolSize, "to", fitted.PoolSize, "limitMiB", b.LimitMiB, "memoryLimitMiB", b.MemoryLimitMiB)
	}
	limitGoMemory(fitted)
	return fitted, nil
}

// limitGoMemory sets the Go runtime's soft memory limit to the manager's
// share of the container's limit, unless GOMEMLIMIT already set one. The
// collector then runs harder as the heap nears that share instead of
// letting garbage grow it into the instances' part, where the kernel would
// OOM-kill the manager. Guest memory is mapped outside the Go runtime, so
// the soft limit does not count it and the share excludes it.
func limitGoMemory(b Budget) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		klog.V(2).InfoS("GOMEMLIMIT is set; the Go soft memory limit is left as it says")
		return
	}
	share := b.HostShareMiB()
	setGoMemoryLimit(int64(share) << 20)
	klog.InfoS("Go soft memory limit set to the manager's share of the container's memory limit",
		"softLimitMiB", share, "limitMiB", b.LimitMiB, "modulesMiB", b.modulesMiB())
}

// unlimited is the value cgroup v1 reports for no limit, rounded down to a
// page; anything this large is no limit either.
const unlimited = 1 << 62

// cgroupMemoryLimit returns the memory limit of the process's cgroup in
// bytes and the file it came from, or 0 when there is no limit or no
// cgroup. It follows /proc/self/cgroup: the v1 memory controller when it
// is mounted (hybrid systems mount both), else the unified v2 hierarchy,
// whose effective limit is the lowest of the cgroup's and its ancestors'.
// Inside a container the cgroup's own directory is usually mounted as the
// hierarchy's root, so the root's file is read when the path is absent.
func cgroupMemoryLimit(root string) (uint64, string, error) {
	data, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	var v1Path, v2Path string
	hasV1, hasV2 := false, false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), ":", 3)
		if len(fields) != 3 {
			continue
		}
		switch {
		case fields[0] == "0" && fields[1] == "":
			v2Path, hasV2 = fields[2], true
		case containsController(fields[1], "memory"):
			v1Path, hasV1 = fields[2], true
		}
	}
	switch {
	case hasV1:
		dir := filepath.Join(root, "sys/fs/cgroup/memory")
		return readLimit(dir, v1Path, "memory.limit_in_bytes", false)
	case hasV2:
		return readLimit(filepath.Join(root, "sys/fs/cgroup"), v2Path, "memory.max", true)
	}
	return 0, "", nil
}

func containsController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads name in the cgroup directory rel under mount, or at the
// mount's root when rel is not there; with ancestors, the lowest limit
// from rel up to the root.
func readLimit(mount, rel, name string, ancestors bool) (uint64, string, error) {
	dir := path.Clean("/" + rel)
	if _, err := os.Stat(filepath.Join(mount, dir)); err != nil {
		dir = "/"
	}
	var lowest uint64
	var from string
	for {
		file := filepath.Join(mount, dir, name)
		limit, err := parseLimit(file)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, "", err
		}
		if limit > 0 && (lowest == 0 || limit < lowest) {
			lowest, from = limit, file
		}
		if !ancestors || dir == "/" {
			return lowest, from, nil
		}
		dir = path.Dir(dir)
	}
}

// parseLimit reads a limit file: bytes, or "max" for none (0).
func parseLimit(file string) (uint64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	if v >= unlimited {
		return 0, nil
	}
	return v, nil
}
