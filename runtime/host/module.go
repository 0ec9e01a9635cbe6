package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/host/internal/loopcheck"
	"github.com/wasmccm/wasmccm/runtime/origin"
	"github.com/wasmccm/wasmccm/runtime/sharedstate"
)

// Info is what the host learned of a module.
type Info struct {
	ABIVersion   int32
	Capabilities []abi.Capability
	// Optional are the optional exports (abi.OptionalExports) the module
	// has, each with the capability it requires.
	Optional []string
	// Imports are the host functions the module imports, in its order.
	Imports []string
}

// Supports reports whether the module exports capability c.
func (i Info) Supports(c abi.Capability) bool {
	for _, have := range i.Capabilities {
		if have == c {
			return true
		}
	}
	return false
}

// Exports reports whether the module has the optional export name.
func (i Info) Exports(name string) bool {
	for _, have := range i.Optional {
		if have == name {
			return true
		}
	}
	return false
}

// Module is a compiled, validated provider module and its instance pool.
// It is safe for concurrent use.
type Module struct {
	cfg      Config
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	info     Info
	methods  map[string]bool
	// setsDeadline: the module has abi.ExportSetDeadline, called before
	// each export.
	setsDeadline bool
	http         *egress.Client
	creds        *credentials.Store
	logger       *guestLogger
	state        *sharedstate.Store
	pool         *pool

	// alive ends when Close stops waiting for in-flight calls: every
	// entry into the guest derives from it (guestContext), so ending it
	// stops all of the module's guest code. timedOut is the cause of an
	// entry that ran past CallTimeout.
	alive    context.Context
	abort    context.CancelFunc
	timedOut error

	closeOnce sync.Once
	closeErr  error

	// life guards stuckCount, the guest code the watchdog gave up on that
	// has not returned, and closing, set once Close has drained the pool:
	// the compiled code goes when both allow (releaseCode).
	life        sync.Mutex
	stuckCount  int
	closing     bool
	releaseOnce sync.Once

	// markBelowList warns, once, that a configured recycling mark is below
	// what an instance holding a Node list takes.
	markBelowList sync.Once
}

func newModule(cfg Config) *Module {
	m := &Module{cfg: cfg, logger: newGuestLogger(cfg.Name, cfg.Log), state: sharedstate.New(cfg.Name, cfg.SharedStateBytes),
		timedOut: fmt.Errorf("ran past the %s call timeout", cfg.CallTimeout)}
	m.alive, m.abort = context.WithCancel(context.Background())
	return m
}

// New compiles wasm, checks it against ABI v1, and makes its first
// instance, running init with cfg.ProviderConfig. Every failure is an error
// that names the problem; nothing is left running after one. Making the
// instance (start functions, ABI version, init) takes at most
// cfg.CallTimeout, whatever ctx allows.
func New(ctx context.Context, wasm []byte, cfg Config) (*Module, error) {
	cfg = cfg.withDefaults()
	registerMetrics()
	m := newModule(cfg)
	var err error
	if m.creds, err = credentials.NewStore(cfg.Credentials); err != nil {
		return nil, err
	}
	if m.http, err = newEgressClient(cfg, m.creds); err != nil {
		return nil, err
	}
	if err := m.compile(ctx, wasm); err != nil {
		return nil, err
	}
	m.pool = newPool(cfg.Name, cfg.PoolSize, m.newSlotInstance)
	first, err := m.newInstance(ctx)
	if err != nil {
		closeRuntime(ctx, m.runtime, m.compiled)
		return nil, err
	}
	m.pool.idle = append(m.pool.idle, first)
	m.info.ABIVersion = abi.Version // newInstance refused any other
	return m, nil
}

// Validate checks wasm against ABI v1 without running init, which needs a
// provider config: it compiles, checks imports and exports, instantiates
// once and reads the ABI version. Every problem found is reported.
// compilationCacheDir is Config.CompilationCacheDir: given the directory a
// New will start the module with, validating compiles the module for both.
func Validate(ctx context.Context, wasm []byte, compilationCacheDir string) (Info, []string) {
	cfg := Config{Name: "validate", CompilationCacheDir: compilationCacheDir}.withDefaults()
	m := newModule(cfg)
	m.http, _ = egress.New(cfg.Name, cfg.HTTP, nil)
	m.creds, _ = credentials.NewStore(cfg.Credentials)
	rt, compiled, err := compile(ctx, wasm, cfg)
	if err != nil {
		return Info{}, []string{err.Error()}
	}
	defer closeRuntime(ctx, rt, compiled)
	m.runtime, m.compiled = rt, compiled
	info, methods, problems := inspect(compiled)
	if len(problems) > 0 {
		return info, problems
	}
	m.info, m.methods, m.setsDeadline = info, methods, setsDeadline(compiled)
	guestCtx, cancel := m.guestContext(ctx)
	defer cancel()
	inst, err := m.instantiate(guestCtx)
	if err != nil {
		return info, []string{err.Error()}
	}
	defer inst.close(ctx)
	version, err := inst.abiVersion(guestCtx)
	if err != nil {
		return info, []string{err.Error()}
	}
	info.ABIVersion = version
	if version != abi.Version {
		return info, []string{versionProblem(version)}
	}
	return info, nil
}

// newEgressClient is the HTTP client of a module run by the host, which
// applies the module's credentials: every origin a credential is bound to
// must be allowed.
func newEgressClient(cfg Config, store *credentials.Store) (*egress.Client, error) {
	allowed, err := origin.ParseSet(cfg.HTTP.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	auth, err := credentials.New(cfg.Name, cfg.Credentials, allowed, store)
	if err != nil {
		return nil, err
	}
	return egress.New(cfg.Name, cfg.HTTP, auth)
}

func versionProblem(v int32) string {
	return fmt.Sprintf("module implements ABI version %d; this host implements version %d", v, abi.Version)
}

// SetShadow marks the module as a candidate in shadow, beside the module in
// service, or, with false, as the module in service: a shadow's requests
// get only the rate budget's spare room (egress.RateBudget), and a call in
// which one was refused is withheld (ErrShadowThrottled). A rollout
// promotes the candidate it has run in shadow with SetShadow(false).
func (m *Module) SetShadow(shadow bool) { m.http.SetShadow(shadow) }

// ClearState empties the module's shared state, so that the next call
// reaches the cloud as a fresh module's would. Tools that judge each call
// by the requests it makes (wasmccm test) call it between calls.
func (m *Module) ClearState() { m.state.Clear() }

// Info returns what the host learned of the module.
func (m *Module) Info() Info { return m.info }

// Name returns the module's name from its Config.
func (m *Module) Name() string { return m.cfg.Name }

// Close refuses new calls and waits for those in flight, instance
// recycling included, until ctx ends. Then it aborts the rest and, ctx or
// not, waits until their guest code has stopped (within abortMargin), or
// for at most stuckAfter more: releasing memory or code under running
// guest code would crash the process, so code still running then keeps
// its instance and the module's compiled code until it returns (see
// watchdog). Its error says whether calls were aborted; later calls
// return the first one's.
func (m *Module) Close(ctx context.Context) error {
	m.closeOnce.Do(func() { m.closeErr = m.close(ctx) })
	return m.closeErr
}

func (m *Module) close(ctx context.Context) error {
	var err error
	if !m.pool.drain(ctx.Done()) {
		err = fmt.Errorf("closing module %s: calls still running when its grace period ended were aborted (%w)", m.cfg.Name, ctx.Err())
		m.abort()
		slow := time.AfterFunc(abortMargin, func() {
			klog.ErrorS(nil, "guest code is still running after it was aborted; the module is released once it stops",
				"module", m.cfg.Name, "after", abortMargin)
		})
		// Guest code running on past stuckAfter has its slot given back
		// by its watchdog, or is stuck with it kept (stuck): either way
		// Close stops waiting, and leaves the code to it.
		wait, cancel := context.WithTimeout(context.Background(), stuckAfter+abortMargin)
		m.pool.drain(wait.Done())
		cancel()
		slow.Stop()
	}
	m.abort()
	m.pool.closeIdle(context.WithoutCancel(ctx))
	m.state.Clear()
	m.life.Lock()
	m.closing = true
	stuck := m.stuckCount
	m.life.Unlock()
	if stuck > 0 {
		// The last of it to return releases the code (returned).
		klog.ErrorS(nil, "Closing the module without releasing its compiled code: guest code the host stopped waiting for still runs in it",
			"module", m.cfg.Name, "instances", stuck)
		return err
	}
	if cerr := m.releaseCode(); err == nil {
		err = cerr
	}
	return err
}

// releaseCode closes the module's runtime and compiled code, once.
func (m *Module) releaseCode() error {
	var err error
	m.releaseOnce.Do(func() { err = closeRuntime(context.Background(), m.runtime, m.compiled) })
	return err
}

// compile builds the runtime and compiled module and checks them.
func (m *Module) compile(ctx context.Context, wasm []byte) error {
	rt, compiled, err := compile(ctx, wasm, m.cfg)
	if err != nil {
		return err
	}
	info, methods, problems := inspect(compiled)
	if len(problems) > 0 {
		closeRuntime(ctx, rt, compiled)
		return fmt.Errorf("module does not conform to ABI v%d: %s", abi.Version, strings.Join(problems, "; "))
	}
	m.runtime, m.compiled, m.info, m.methods, m.setsDeadline = rt, compiled, info, methods, setsDeadline(compiled)
	return nil
}

// closeRuntime closes rt and compiled, the module it compiled. A runtime
// that shares a compilation cache leaves what it compiled in the cache's
// memory until the compiled module itself is closed; wazero frees the code
// once every runtime using it has closed it.
func closeRuntime(ctx context.Context, rt wazero.Runtime, compiled wazero.CompiledModule) error {
	err := rt.Close(ctx)
	compiled.Close(ctx) // always nil
	return err
}

func compile(ctx context.Context, wasm []byte, cfg Config) (wazero.Runtime, wazero.CompiledModule, error) {
	if err := checkBounds(wasm, cfg); err != nil {
		return nil, nil, err
	}
	// The host stops guest code only from the check the rewrite adds
	// (loopcheck), so a module it cannot rewrite is not run.
	bound := cfg.FrameBound()
	instrumented, maxFrame, err := loopcheck.Instrument(wasm, loopcheck.Options{StackBytes: bound, Entries: entries})
	if err == nil && maxFrame > int(bound/2) {
		return nil, nil, fmt.Errorf("a function of the module takes up to %d KiB of stack per call, more than half of what the frames of one call may take with limits.stackLimitMiB %d; raise limits.stackLimitMiB to at least %d",
			(maxFrame+1023)>>10, cfg.StackLimitBytes>>20, (maxFrame*2*5+1<<20-1)>>20)
	}
	if err == nil {
		rt, compiled, cerr := compileWith(ctx, instrumented, cfg)
		var timeout *compileTimeoutError
		if cerr == nil || errors.As(cerr, &timeout) {
			return rt, compiled, cerr
		}
		err = cerr
	}
	// Either the module is invalid, which wazero says best of the module
	// as written, or the rewrite failed it.
	cfg.CompilationCacheDir = ""
	rt, compiled, cerr := compileWith(ctx, wasm, cfg)
	if cerr != nil {
		return nil, nil, cerr
	}
	closeRuntime(ctx, rt, compiled)
	return nil, nil, fmt.Errorf("the host cannot add its deadline and stack checks to the module, so it does not run it: %w", err)
}

// compileTimeoutError is the compile error of a module that took longer
// than Config.CompileTimeout.
type compileTimeoutError struct{ limit time.Duration }

func (e *compileTimeoutError) Error() string {
	return fmt.Sprintf("compiling the module took longer than %s; it was abandoned", e.limit)
}

// compileWith compiles wasm in a new runtime. Guest code is stopped by
// the check the rewrite adds, not by wazero's WithCloseOnContextDone.
func compileWith(ctx context.Context, wasm []byte, cfg Config) (wazero.Runtime, wazero.CompiledModule, error) {
	rc := wazero.NewRuntimeConfigCompiler().
		WithMemoryLimitPages(cfg.MemoryLimitPages)
	var cache *compilationCache
	if cfg.CompilationCacheDir != "" {
		var err error
		if cache, err = sharedCompilationCache(cfg.CompilationCacheDir); err != nil {
			return nil, nil, err
		}
		rc = rc.WithCompilationCache(cache.cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, nil, fmt.Errorf("instantiating WASI: %w", err)
	}
	if err := instantiateHostFunctions(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, nil, err
	}
	compileCtx, cancel := context.WithTimeout(experimental.WithCompilationWorkers(ctx, cfg.CompilationWorkers), cfg.CompileTimeout)
	defer cancel()
	compiled, err := cache.compile(compileCtx, rt, wasm)
	if err != nil {
		rt.Close(ctx)
		if errors.Is(compileCtx.Err(), context.DeadlineExceeded) {
			return nil, nil, &compileTimeoutError{cfg.CompileTimeout}
		}
		return nil, nil, fmt.Errorf("invalid wasm module: %w", err)
	}
	return rt, compiled, nil
}

// Signatures of the ABI's exports.
var (
	i32            = api.ValueTypeI32
	i64            = api.ValueTypeI64
	sigVersion     = signature{nil, []api.ValueType{i32}}
	sigAlloc       = signature{[]api.ValueType{i32}, []api.ValueType{i32}}
	sigMethod      = signature{[]api.ValueType{i32, i32}, []api.ValueType{i64}}
	sigSetDeadline = signature{[]api.ValueType{i64}, nil}
	exportedMemory = "memory"
)

type signature struct{ params, results []api.ValueType }

func (s signature) String() string {
	return fmt.Sprintf("(%s) -> (%s)", valueTypes(s.params), valueTypes(s.results))
}

func valueTypes(ts []api.ValueType) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = api.ValueTypeName(t)
	}
	return strings.Join(names, ", ")
}

func (s signature) matches(def api.FunctionDefinition) bool {
	return equalTypes(s.params, def.ParamTypes()) && equalTypes(s.results, def.ResultTypes())
}

func equalTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// setsDeadline reports whether compiled exports abi.ExportSetDeadline;
// inspect refuses it with a signature other than sigSetDeadline.
func setsDeadline(compiled wazero.CompiledModule) bool {
	_, ok := compiled.ExportedFunctions()[abi.ExportSetDeadline]
	return ok
}

// inspect checks a compiled module's imports and exports against the ABI,
// collecting every problem so that an author sees them all at once.
func inspect(compiled wazero.CompiledModule) (Info, map[string]bool, []string) {
	var problems []string
	exports := compiled.ExportedFunctions()
	checkExport := func(name string, sig signature) bool {
		def, ok := exports[name]
		if !ok {
			return false
		}
		if !sig.matches(def) {
			problems = append(problems, fmt.Sprintf("export %s has signature (%s) -> (%s), want %s",
				name, valueTypes(def.ParamTypes()), valueTypes(def.ResultTypes()), sig))
		}
		return true
	}
	for name, sig := range map[string]signature{abi.ExportABIVersion: sigVersion, abi.ExportAlloc: sigAlloc, abi.ExportInit: sigMethod} {
		if !checkExport(name, sig) {
			problems = append(problems, "missing export "+name)
		}
	}
	if _, ok := compiled.ExportedMemories()[exportedMemory]; !ok {
		problems = append(problems, `missing exported memory "memory"`)
	}
	if len(compiled.ImportedMemories()) > 0 {
		problems = append(problems, "module imports a memory; provider modules must define their own")
	}

	info := Info{}
	methods := map[string]bool{abi.ExportInit: true}
	for _, c := range abi.Capabilities {
		var present, missing []string
		for _, name := range c.Exports {
			if checkExport(name, sigMethod) {
				present = append(present, name)
			} else {
				missing = append(missing, name)
			}
		}
		switch {
		case len(missing) == 0:
			info.Capabilities = append(info.Capabilities, c.Capability)
			for _, name := range present {
				methods[name] = true
			}
		case len(present) > 0:
			problems = append(problems, fmt.Sprintf("capability %s is incomplete: has %s but lacks %s",
				c.Capability, strings.Join(present, ", "), strings.Join(missing, ", ")))
		}
	}
	for _, o := range abi.OptionalExports {
		if !checkExport(o.Export, sigMethod) {
			continue
		}
		if !info.Supports(o.Requires) {
			problems = append(problems, fmt.Sprintf("export %s needs capability %s, which the module lacks", o.Export, o.Requires))
			continue
		}
		info.Optional = append(info.Optional, o.Export)
		methods[o.Export] = true
	}
	// Optional and not a method: only a wrong signature is a problem.
	checkExport(abi.ExportSetDeadline, sigSetDeadline)

	for _, def := range compiled.ImportedFunctions() {
		module, name, _ := def.Import()
		switch module {
		case wasi_snapshot_preview1.ModuleName, loopcheck.ImportModule:
		case abi.ImportModule:
			sig, known := hostFunctionSignatures[name]
			if known {
				info.Imports = append(info.Imports, name)
			}
			if !known {
				problems = append(problems, fmt.Sprintf("imports unknown host function %s.%s", module, name))
			} else if !sig.matches(def) {
				problems = append(problems, fmt.Sprintf("imports %s.%s as (%s) -> (%s), the host provides %s",
					module, name, valueTypes(def.ParamTypes()), valueTypes(def.ResultTypes()), sig))
			}
		default:
			problems = append(problems, fmt.Sprintf("imports %s.%s from module %q, which the host does not provide", module, name, module))
		}
	}
	return info, methods, problems
}

// instantiate makes a fresh instance in the sandbox: no files, no
// environment, no arguments, real clocks and randomness, sleeps that end
// with ctx, and stdout/stderr into the log. ctx is a guestContext.
func (m *Module) instantiate(ctx context.Context) (*instance, error) {
	sleep := &sleeper{done: ctx.Done()}
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions("_initialize").
		WithStdout(&streamWriter{logger: m.logger, level: abi.LogInfo}).
		WithStderr(&streamWriter{logger: m.logger, level: abi.LogError}).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(sleep.sleep).
		WithRandSource(rand.Reader)
	mod, err := m.runtime.InstantiateModule(experimental.WithMemoryAllocator(ctx, memoryAllocator), m.compiled, mc)
	if err == nil && ctx.Err() != nil {
		// A start function returned from a sleep cut short before
		// wazero stopped it: it did not finish in time all the same.
		_ = mod.Close(context.WithoutCancel(ctx))
		err = ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("instantiating module: start functions stopped: %w", m.stopCause(ctx))
		}
		return nil, fmt.Errorf("instantiating module: %w", err)
	}
	return newInstance(m, mod, sleep), nil
}

// newInstance makes an instance ready for calls: ABI version checked and
// init run with the provider config, all within one CallTimeout.
func (m *Module) newInstance(ctx context.Context) (*instance, error) {
	ctx, cancel := m.guestContext(ctx)
	defer cancel()
	inst, err := m.instantiate(ctx)
	if err != nil {
		return nil, err
	}
	version, err := inst.abiVersion(ctx)
	if err == nil && version != abi.Version {
		err = errors.New(versionProblem(version))
	}
	if err == nil {
		err = m.callInstance(ctx, inst, abi.ExportInit, &abi.InitRequest{ClusterName: m.cfg.ClusterName, Config: m.cfg.ProviderConfig}, nil)
		var status *StatusError
		if errors.As(err, &status) {
			err = fmt.Errorf("module rejected its configuration: %s", status.Message)
		}
	}
	if err != nil {
		inst.close(ctx)
		return nil, err
	}
	inst.readyBytes = uint64(inst.mem.Size())
	inst.recycleAbove = m.cfg.recycleMark(inst.readyBytes)
	klog.V(4).InfoS("module instance ready", "module", m.cfg.Name, "memoryBytes", inst.mem.Size(), "highWaterBytes", inst.recycleAbove)
	return inst, nil
}

// newSlotInstance is newInstance for a caller that holds a pool slot (a
// call that finds no idle instance, a recycle), watched: errSlotGivenBack
// when its guest code ran so long that the watchdog gave the slot back.
func (m *Module) newSlotInstance(ctx context.Context) (*instance, error) {
	ctx, cancel := m.guestContext(ctx)
	defer cancel()
	watch := m.watch(ctx, "making an instance")
	inst, err := m.newInstance(ctx)
	if watch.done() {
		m.returned(inst)
		return nil, errSlotGivenBack
	}
	return inst, err
}

// Call runs export with input in and decodes the payload into out (nil for
// exports without one). It returns nil, a *StatusError for a non-OK status
// the module answered, or a *FailureError when the module gave no answer
// or, in shadow, when the host withheld it (ErrShadowThrottled). The Nodes
// of a LoadBalancerRequest must not change once passed: the host sends a
// module a Node list once and knows it again by its identity
// (abi.ExportSetLoadBalancerNodes).
func (m *Module) Call(ctx context.Context, export string, in, out abi.Message) error {
	if !m.methods[export] {
		return &FailureError{Export: export, Reason: ReasonUnavailable, Err: ErrUnsupported}
	}
	start := time.Now()
	ctx, cancel := m.guestContext(ctx)
	defer cancel()
	affinity := m.affinity(export, in)
	inst, err := m.pool.acquire(ctx, affinity)
	if errors.Is(err, ErrClosed) {
		// Not a failed call: the module was replaced, and the caller
		// retries on its successor.
		return &FailureError{Export: export, Reason: ReasonUnavailable, Err: err}
	}
	if err != nil {
		err = &FailureError{Export: export, Reason: ReasonUnavailable, Err: err}
		m.observe(export, time.Since(start), err)
		return err
	}
	watch := m.watch(ctx, export)
	if in, err = m.withNodesSent(ctx, inst, export, in, affinity); err == nil {
		err = m.callInstance(ctx, inst, export, in, out)
	}
	// One clock reading ends the call for its metrics and the pool's idle
	// time alike: this is the path of every call.
	end := time.Now()
	if watch.done() {
		m.returned(inst)
		m.observe(export, end.Sub(start), err)
		return err
	}
	// Read before the instance goes back to the pool, where another call
	// may take it.
	shadowRefused := inst.shadowRefused
	var failure *FailureError
	switch {
	case errors.As(err, &failure):
		m.replace(inst, failure)
		m.pool.release(nil, end)
	case uint64(inst.mem.Size()) > inst.recycleAbove:
		go m.recycle(inst)
	default:
		m.pool.release(inst, end)
	}
	if shadowRefused {
		err = withheld(export)
	}
	m.observe(export, end.Sub(start), err)
	return err
}

// observe records an export call that lasted took and ended with err.
func (m *Module) observe(export string, took time.Duration, err error) {
	callDuration.WithLabelValues(m.cfg.Name, export).Observe(took.Seconds())
	callsTotal.WithLabelValues(m.cfg.Name, export, outcomeLabel(err)).Inc()
}

func (m *Module) replace(inst *instance, failure *FailureError) {
	instancesReplaced.WithLabelValues(m.cfg.Name, failure.Reason).Inc()
	klog.InfoS("closing module instance after a failed call; the next call gets a new one",
		"module", m.cfg.Name, "export", failure.Export, "reason", failure.Reason, "err", failure.Err)
	inst.close(context.Background())
}

// wasmPageSize is the unit of linear memory.
const wasmPageSize = 64 << 10

// Bounds of the high-water mark derived when Config.RecycleAbovePages is
// zero: recycleMark's reasoning.
const (
	recycleGrowthFactor = 8
	recycleFloorBytes   = 4 << 20
)

// recycleMark is the high-water mark of an instance that holds initBytes of
// linear memory after init. A configured mark wins. Otherwise it is
// recycleGrowthFactor times initBytes, at least recycleFloorBytes and at
// most a quarter of the cap. Why a multiple: a collected heap settles at a
// few times its start, and replacing such an instance costs milliseconds
// and megabytes of host allocation, so it is left alone. A module without
// a collector starts small and grows by all it allocates; at the floor it
// is replaced every few calls, so between calls none of the pool's
// instances holds more than the floor. BENCHMARKS.md's guest memory
// results have the figures.
func (c Config) recycleMark(initBytes uint64) uint64 {
	if c.RecycleAbovePages != 0 {
		return uint64(c.RecycleAbovePages) * wasmPageSize
	}
	return min(max(recycleGrowthFactor*initBytes, recycleFloorBytes), c.recycleCap())
}

// recycleCap bounds a derived high-water mark: a quarter of the cap.
func (c Config) recycleCap() uint64 { return uint64(c.MemoryLimitPages) * wasmPageSize / 4 }

// recycleMarkHolding is recycleMark for an instance that holds, besides
// the initBytes init left, what it was sent to keep (a Node list), for
// which its memory grew by held bytes. That is not garbage, so the mark
// moves up by it, and to twice what the instance then holds, because a
// heap that grows by doubling (TinyGo's) takes its next growth past any
// mark below that: without it, an instance sent a list as large as its
// headroom would be replaced after every call, and sent the list again.
// It is derived from init, not from the last mark, so that a list
// replaced by another does not raise it twice. It stops at the derived
// mark's cap; a configured mark stays.
func (c Config) recycleMarkHolding(initBytes, held uint64) uint64 {
	mark := c.recycleMark(initBytes)
	if c.RecycleAbovePages != 0 {
		return mark
	}
	return max(mark, min(max(mark+held, 2*(initBytes+held)), c.recycleCap()))
}

// recycle closes an instance whose memory grew past the high-water mark and
// makes its successor, keeping the instance's slot meanwhile: the call that
// grew it has already returned, the pool never holds more instances than
// its size, and the old memory is unmapped before the new instance exists.
// newInstance bounds the successor's start-up, so a module whose init
// hangs holds the slot for at most CallTimeout, and Close waits for it.
func (m *Module) recycle(inst *instance) {
	size := inst.mem.Size()
	inst.close(context.Background())
	instancesRecycled.WithLabelValues(m.cfg.Name).Inc()
	klog.V(2).InfoS("replaced a module instance whose memory passed the high-water mark",
		"module", m.cfg.Name, "memoryBytes", size, "highWaterBytes", inst.recycleAbove)
	fresh, err := m.newSlotInstance(context.Background())
	if errors.Is(err, errSlotGivenBack) {
		return
	}
	if err != nil {
		// The next call makes one and reports the error to its caller.
		klog.ErrorS(err, "making a module instance to replace a recycled one", "module", m.cfg.Name)
	}
	m.pool.release(fresh, time.Now())
}

func outcomeLabel(err error) string {
	if err == nil {
		return "ok" // before the targets of errors.As, which escape
	}
	var status *StatusError
	var failure *FailureError
	switch {
	case errors.As(err, &status):
		return status.Status.String()
	case errors.As(err, &failure):
		return failure.Reason
	}
	return "error"
}
