package host

import (
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/egress"
)

// Config is what an operator grants a module and the limits it runs under.
// The zero value of each field selects the default documented on it.
type Config struct {
	// Name labels the module in logs and metrics.
	Name string
	// ClusterName is passed to the module's init.
	ClusterName string
	// ProviderConfig is handed verbatim to the module's init.
	ProviderConfig []byte

	// PoolSize is the number of instances, hence of concurrent calls.
	// Default 4. Instances are made as calls need them, and a call takes
	// an idle one: the one holding its load balancer Node list, or for
	// other calls one holding none, so that few instances keep a list.
	PoolSize int
	// CallTimeout bounds every export call, host functions and WASI
	// sleeps included, and the making of each instance (start functions,
	// ABI version and init together). Default 30s.
	CallTimeout time.Duration
	// MemoryLimitPages caps each instance's linear memory in 64 KiB pages.
	// Default 2048 (128 MiB).
	MemoryLimitPages uint32
	// StackLimitBytes is the most host memory one instance's call stack
	// may take, which the memory budget counts beside its linear memory.
	// A call whose frames would pass it traps (see FrameBound). Default
	// DefaultStackLimitBytes.
	StackLimitBytes int

	// RecycleAbovePages is the high-water mark of an instance's linear
	// memory: after a call, an instance whose memory is larger is closed
	// and replaced off the call path. Guest heaps (Go's, TinyGo's) never
	// shrink, so without it every instance would keep the largest heap
	// any call ever needed; and a module built without a collector (TinyGo
	// with -gc=leaking, as recommended) frees nothing, so for it recycling
	// is what reclaims memory, and one call may allocate at most
	// MemoryLimitPages - RecycleAbovePages.
	//
	// Zero, the default, sets each instance's mark from what it holds
	// after init (see recycleMark), and from the load balancer Node list
	// it holds once sent one (recycleMarkHolding): a module with a
	// collector settles at a few times that and is left alone, one without
	// is replaced every few calls, which costs it a fresh instance
	// (BENCHMARKS.md has the figure) instead of memory the host never gets
	// back.
	RecycleAbovePages uint32

	// MaxFunctions and MaxCodeBytes bound what the host agrees to compile;
	// a larger module is refused before compilation starts, with a
	// *BoundsError. Defaults 50,000 and 32 MiB.
	MaxFunctions int
	MaxCodeBytes int
	// CompileTimeout bounds compilation.
	// Default 60s.
	CompileTimeout time.Duration

	// CompilationCacheDir, when set, keeps compiled machine code on disk so
	// that restarts skip compilation.
	CompilationCacheDir string
	// CompilationWorkers is the number of goroutines compiling functions.
	// Default: 2, and never fewer: wazero checks CompileTimeout between
	// functions only when it compiles with several workers.
	CompilationWorkers int

	// SharedStateBytes bounds the module's shared state (the state_get
	// and state_set imports), keys, values and a fixed per-entry overhead
	// counted, and the claims in progress with them; least recently used
	// entries are evicted beyond it, one entry may take a quarter of it,
	// and so may all claims together. Default 8 MiB: a snapshot of 5,000
	// cloud servers as the hcloud module keeps it takes about 2 MiB.
	SharedStateBytes int

	HTTP        egress.Config
	Credentials credentials.Config

	// OnStuck, when set, is told when the host stops waiting for guest
	// code that ran on past its deadline (what names the export, or
	// "making an instance"): its instance stays until the code returns.
	OnStuck func(what string)

	// Log, when set, receives the module's log lines, stdout and stderr
	// included, at every level and unthrottled, instead of klog: tools use
	// it to show or check what a module logs.
	Log func(level abi.LogLevel, msg string)
}

// DefaultSharedStateBytes is Config.SharedStateBytes's default.
const DefaultSharedStateBytes = 8 << 20

// DefaultStackLimitBytes is Config.StackLimitBytes's default: room for
// the deepest calls of the shipped modules, which the end-to-end tests run
// under it.
const DefaultStackLimitBytes = 8 << 20

// FrameBound is what the frame estimates (loopcheck.FrameBytes) of one
// call's frames may sum to, so that the instance's stack stays within
// StackLimitBytes. A call holds at most the bound plus the frame that
// finds it spent, or a leaf, which the rewrite does not count, and the
// host refuses a module with a frame over half the bound (compile): so at
// most 3/2 of the bound. wazero grows a stack by making one of twice its
// size and the next frame's, into which it copies the old one: for a
// moment it holds three times the stack in use and a frame, five times
// the bound in all.
func (c Config) FrameBound() int32 { return int32(c.StackLimitBytes / 5) }

// Defaults is the Config whose every field took its default, as New
// applies them.
func Defaults() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "module"
	}
	if c.PoolSize <= 0 {
		c.PoolSize = 4
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.MemoryLimitPages == 0 {
		c.MemoryLimitPages = 2048
	}
	if c.StackLimitBytes <= 0 {
		c.StackLimitBytes = DefaultStackLimitBytes
	}
	if c.MaxFunctions <= 0 {
		c.MaxFunctions = defaultMaxFunctions
	}
	if c.MaxCodeBytes <= 0 {
		c.MaxCodeBytes = defaultMaxCodeBytes
	}
	if c.CompileTimeout <= 0 {
		c.CompileTimeout = 60 * time.Second
	}
	c.CompilationWorkers = max(c.CompilationWorkers, 2)
	if c.SharedStateBytes <= 0 {
		c.SharedStateBytes = DefaultSharedStateBytes
	}
	c.HTTP = c.HTTP.WithDefaults()
	return c
}
