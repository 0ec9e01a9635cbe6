package provider

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

// Defaults of LimitsConfig, the same as runtime/host's.
const (
	defaultPoolSize       = 4
	defaultMemoryLimitMiB = 128
)

// cgroupRoot is where /proc and /sys are found; tests point it at a fake
// tree.
var cgroupRoot = "/"

// setGoMemoryLimit is debug.SetMemoryLimit; tests record the call instead.
var setGoMemoryLimit = debug.SetMemoryLimit

// MemoryBudget is what the configuration may cost at most against the
// container's memory limit.
type MemoryBudget struct {
	PoolSize, MemoryLimitMiB int
	// SharedStateMiB is each copy's shared state, at its bound.
	SharedStateMiB int
	// Copies is 2 when hot reload or the last-known-good record is on: a
	// new module's instances run beside the old one's, in shadow and while
	// the old one's finish their calls.
	Copies int
	// LimitMiB is the cgroup's limit, 0 when there is none; LimitFile
	// says where it was read.
	LimitMiB  int
	LimitFile string
}

// NeedMiB is the worst case: every instance of every copy at its cap, and
// the manager itself.
func (b MemoryBudget) NeedMiB() int {
	return HostBaselineMiB + b.modulesMiB()
}

// HostShareMiB is what the limit leaves the manager once every instance
// of every copy is at its cap.
func (b MemoryBudget) HostShareMiB() int {
	return b.LimitMiB - b.modulesMiB()
}

// modulesMiB is every instance of every copy at its cap, and every copy's
// shared state at its bound.
func (b MemoryBudget) modulesMiB() int {
	return b.Copies * (b.PoolSize*b.MemoryLimitMiB + b.SharedStateMiB)
}

func (b MemoryBudget) String() string {
	copies := ""
	if b.Copies > 1 {
		copies = fmt.Sprintf(" x %d (old and new module overlap during a reload)", b.Copies)
	}
	return fmt.Sprintf("(limits.poolSize %d x limits.memoryLimitMiB %d + limits.sharedStateMiB %d)%s + %d MiB for the manager = %d MiB",
		b.PoolSize, b.MemoryLimitMiB, b.SharedStateMiB, copies, HostBaselineMiB, b.NeedMiB())
}

// applyMemoryBudget refuses a configuration whose modules could need more
// memory than the container has, since reaching the limit gets the whole
// manager OOM-killed, every controller with it. With
// limits.fitPoolToMemory it lowers the pool size instead, down to one
// instance. A configuration that fits sets the Go runtime's soft memory
// limit to the manager's share (see limitGoMemory).
func applyMemoryBudget(cfg *Config, twoModules bool) error {
	b := MemoryBudget{PoolSize: cfg.Limits.PoolSize, MemoryLimitMiB: int(cfg.Limits.MemoryLimitMiB),
		SharedStateMiB: int(cfg.Limits.SharedStateMiB), Copies: 1}
	if b.SharedStateMiB == 0 {
		b.SharedStateMiB = host.DefaultSharedStateBytes >> 20
	}
	if b.PoolSize == 0 {
		b.PoolSize = defaultPoolSize
	}
	if b.MemoryLimitMiB == 0 {
		b.MemoryLimitMiB = defaultMemoryLimitMiB
	}
	if twoModules {
		b.Copies = 2
	}
	limit, file, err := cgroupMemoryLimit(cgroupRoot)
	if err != nil {
		return fmt.Errorf("memory budget: reading the container's memory limit: %w", err)
	}
	if limit == 0 {
		klog.V(2).InfoS("no container memory limit found; the memory budget is not checked", "budget", b.String())
		return nil
	}
	b.LimitMiB, b.LimitFile = int(min(limit>>20, 1<<40)), file
	if b.NeedMiB() > b.LimitMiB {
		fit := ((b.LimitMiB-HostBaselineMiB)/b.Copies - b.SharedStateMiB) / b.MemoryLimitMiB
		if !cfg.Limits.FitPoolToMemory || fit < 1 {
			return fmt.Errorf("memory budget: %s, over the container's memory limit of %d MiB (%s); "+
				"lower limits.poolSize or limits.memoryLimitMiB, raise the container's memory limit to at least %dMi, "+
				"or set limits.fitPoolToMemory to lower the pool size to what fits",
				b, b.LimitMiB, b.LimitFile, b.NeedMiB())
		}
		klog.InfoS("lowering the module pool size to fit the container's memory limit",
			"from", b.PoolSize, "to", fit, "limitMiB", b.LimitMiB, "memoryLimitMiB", b.MemoryLimitMiB)
		cfg.Limits.PoolSize, b.PoolSize = fit, fit
	}
	limitGoMemory(b)
	return nil
}

// limitGoMemory sets the Go runtime's soft memory limit to the manager's
// share of the container's limit, unless GOMEMLIMIT already set one. The
// collector then runs harder as the heap nears that share instead of
// letting garbage grow it into the instances' part, where the kernel would
// OOM-kill the manager. Guest memory is mapped outside the Go runtime, so
// the soft limit does not count it and the share excludes it.
func limitGoMemory(b MemoryBudget) {
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
