package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/host/internal/loopcheck"
)

// hostFunctionSignatures is the import side of the ABI, checked against a
// module's imports before it is instantiated.
var hostFunctionSignatures = map[string]signature{
	abi.ImportHTTPDo:      {[]api.ValueType{i32, i32}, []api.ValueType{i32}},
	abi.ImportCredential:  {[]api.ValueType{i32, i32}, []api.ValueType{i32}},
	abi.ImportLog:         {[]api.ValueType{i32, i32, i32}, nil},
	abi.ImportLogEnabled:  {[]api.ValueType{i32}, []api.ValueType{i32}},
	abi.ImportTakeResult:  {[]api.ValueType{i32, i32}, []api.ValueType{i32}},
	abi.ImportStateGet:    {[]api.ValueType{i32, i32, i64, i32}, []api.ValueType{i32}},
	abi.ImportStateSet:    {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}},
	abi.ImportStateDelete: {[]api.ValueType{i32, i32}, nil},
}

// instantiateHostFunctions adds the "wasmccm" host module to rt. The
// functions are shared by every instance; each finds its caller's state
// (module config, pending result) through the call's context.
func instantiateHostFunctions(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(abi.ImportModule)
	export := func(name string, fn api.GoModuleFunc) {
		sig := hostFunctionSignatures[name]
		b.NewFunctionBuilder().WithGoModuleFunction(fn, sig.params, sig.results).Export(name)
	}
	export(abi.ImportHTTPDo, hostHTTPDo)
	export(abi.ImportCredential, hostCredential)
	export(abi.ImportLog, hostLog)
	export(abi.ImportLogEnabled, hostLogEnabled)
	export(abi.ImportTakeResult, hostTakeResult)
	export(abi.ImportStateGet, hostStateGet)
	export(abi.ImportStateSet, hostStateSet)
	export(abi.ImportStateDelete, hostStateDelete)
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("instantiating host functions: %w", err)
	}
	_, err := rt.NewHostModuleBuilder(loopcheck.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(checkDeadline), []api.ValueType{i32}, nil).Export(loopcheck.ImportName).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("instantiating the loop check: %w", err)
	}
	return nil
}

// checkDeadline is what an instrumented module calls whenever it has spent
// loopcheck.Budget, or when a function's frame finds the stack bound spent
// (stack[0], what remains of it, below zero): it traps the call for the
// stack, stops the guest once the entry's context has ended, with the
// exit code wazero's own check gives, and in any case returns to Go, where
// a stop-the-world collection can take the goroutine.
func checkDeadline(ctx context.Context, _ api.Module, stack []uint64) {
	if int32(stack[0]) < 0 {
		panic(errStackExhausted)
	}
	switch err := ctx.Err(); {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded):
		panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
	default:
		panic(sys.NewExitError(sys.ExitCodeContextCanceled))
	}
}

// caller returns the running call's instance and module. Host functions are
// only reachable during a call the host started, so a missing instance is a
// host bug, reported as an ABI violation rather than a crash.
func caller(ctx context.Context) (*instance, *Module) {
	inst := callerInstance(ctx)
	if inst == nil || inst.owner == nil {
		panic(&abiViolation{"host function called outside a host-initiated call"})
	}
	return inst, inst.owner
}

// read returns guest memory [ptr, ptr+size) or aborts the call: a guest
// that points outside its memory is broken or hostile either way. What it
// returns is a view of guest memory, not a copy: a host function bounds a
// size the guest gave before it copies what read returns.
func (i *instance) read(ptr, size uint32, what string) []byte {
	b, ok := i.mem.Read(ptr, size)
	if !ok {
		i.abort(fmt.Sprintf("%s: %d bytes at %#x are outside guest memory", what, size, ptr))
	}
	return b
}

func (i *instance) abort(msg string) {
	i.violation = &abiViolation{msg}
	panic(i.violation)
}

// setPending keeps a host function's result for take_result and returns
// its size. It keeps b itself, which no one modifies afterwards (a state
// value, a credential, a response encoded for this call), rather than a
// copy in a buffer that would keep the largest result's size for as long
// as the instance lives.
func (i *instance) setPending(b []byte) uint64 {
	i.pending = b
	i.hasPending = true
	return uint64(uint32(int32(len(i.pending))))
}

func errno(e abi.Errno) uint64 { return uint64(uint32(int32(e))) }

func hostHTTPDo(ctx context.Context, mod api.Module, stack []uint64) {
	inst, m := caller(ctx)
	ptr, size := uint32(stack[0]), uint32(stack[1])
	if int(size) > m.cfg.HTTP.MaxRequestBytes {
		inst.abort(fmt.Sprintf("%s: request of %d bytes exceeds the %d-byte limit", abi.ImportHTTPDo, size, m.cfg.HTTP.MaxRequestBytes))
	}
	var req abi.HTTPRequest
	if err := abi.Unmarshal(inst.read(ptr, size, abi.ImportHTTPDo), &req); err != nil {
		inst.abort(fmt.Sprintf("%s: %v", abi.ImportHTTPDo, err))
	}
	resp, shadowRefused := m.http.Do(ctx, &req)
	if shadowRefused {
		inst.shadowRefused = true
	}
	stack[0] = inst.setPending(abi.Marshal(nil, resp))
}

func hostCredential(ctx context.Context, mod api.Module, stack []uint64) {
	inst, m := caller(ctx)
	ptr, size := uint32(stack[0]), uint32(stack[1])
	if size > credentials.MaxNameBytes {
		// No readable credential has so long a name.
		stack[0] = errno(abi.ErrnoNotGranted)
		return
	}
	name := string(inst.read(ptr, size, abi.ImportCredential))
	value, e := m.creds.ReadRaw(name)
	switch e {
	case 0:
		credentialReads.WithLabelValues(m.cfg.Name, name, "ok").Inc()
	case abi.ErrnoNotGranted:
		// Without the name, which the module chose: ever new names would
		// make ever new metric series.
		credentialReads.WithLabelValues(m.cfg.Name, "", "not_granted").Inc()
	default:
		credentialReads.WithLabelValues(m.cfg.Name, name, "not_found").Inc()
	}
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	stack[0] = inst.setPending(value)
}

// RawCredentialReads lists, sorted, the credentials the module has read
// raw through the credential import: each is a secret the module held.
func (m *Module) RawCredentialReads() []string { return m.creds.RawReads() }

func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	inst, m := caller(ctx)
	level := abi.LogLevel(int32(uint32(stack[0])))
	size := min(uint32(stack[2]), maxLogLine)
	m.logger.log(level, inst.read(uint32(stack[1]), size, abi.ImportLog))
}

func hostLogEnabled(ctx context.Context, mod api.Module, stack []uint64) {
	_, m := caller(ctx)
	if m.logger.enabled(abi.LogLevel(int32(uint32(stack[0])))) {
		stack[0] = 1
	} else {
		stack[0] = 0
	}
}

func hostTakeResult(ctx context.Context, mod api.Module, stack []uint64) {
	inst, _ := caller(ctx)
	ptr, size := uint32(stack[0]), uint32(stack[1])
	if !inst.hasPending || int(size) != len(inst.pending) {
		stack[0] = errno(abi.ErrnoNoResult)
		return
	}
	if !inst.mem.Write(ptr, inst.pending) {
		inst.abort(fmt.Sprintf("%s: %d bytes at %#x are outside guest memory", abi.ImportTakeResult, size, ptr))
	}
	inst.pending, inst.hasPending = nil, false
	stack[0] = uint64(size)
}

// stateKey reads a shared state key; one over abi.MaxStateKeyBytes aborts
// the call, as the guest gave the host more than the ABI allows.
func (i *instance) stateKey(ptr, size uint32, what string) string {
	return string(i.stateKeyView(ptr, size, what))
}

// stateKeyView is stateKey as a view of guest memory, valid until the
// host function returns: a read looks the key up without copying it.
func (i *instance) stateKeyView(ptr, size uint32, what string) []byte {
	if size > abi.MaxStateKeyBytes {
		i.abort(fmt.Sprintf("%s: key of %d bytes exceeds the %d-byte limit", what, size, abi.MaxStateKeyBytes))
	}
	return i.read(ptr, size, what)
}

func hostStateGet(ctx context.Context, mod api.Module, stack []uint64) {
	inst, m := caller(ctx)
	key := inst.stateKeyView(uint32(stack[0]), uint32(stack[1]), abi.ImportStateGet)
	maxAge := time.Duration(-1)
	if ms := int64(stack[2]); ms >= 0 {
		maxAge = time.Duration(min(ms, int64(maxStateAge/time.Millisecond))) * time.Millisecond
	}
	value, e := m.state.Get(ctx, &inst.claims, key, maxAge, uint32(stack[3]) == 1)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	stack[0] = inst.setPending(value)
}

// maxStateAge caps a reader's max age so the conversion cannot overflow;
// a year is "any age" for every purpose here.
const maxStateAge = 365 * 24 * time.Hour

func hostStateSet(ctx context.Context, mod api.Module, stack []uint64) {
	inst, m := caller(ctx)
	key := inst.stateKey(uint32(stack[0]), uint32(stack[1]), abi.ImportStateSet)
	value := inst.read(uint32(stack[2]), uint32(stack[3]), abi.ImportStateSet)
	stack[0] = errno(m.state.Set(key, value))
}

func hostStateDelete(ctx context.Context, mod api.Module, stack []uint64) {
	inst, m := caller(ctx)
	m.state.Delete(inst.stateKey(uint32(stack[0]), uint32(stack[1]), abi.ImportStateDelete))
}
