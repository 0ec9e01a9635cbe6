// Package hosttest gives benchmarks outside runtime/host a module as the
// host compiles it, so that they time the guest's code with the checks
// the host adds (runtime/host/internal/loopcheck) as well as without.
package hosttest

import (
	"context"
	"errors"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/host/internal/loopcheck"
)

// Instrument returns wasm rewritten as the host rewrites a module whose
// limits are the defaults; entries are the exports the rewrite's entry
// function reaches.
func Instrument(wasm []byte, entries ...string) ([]byte, error) {
	out, _, err := loopcheck.Instrument(wasm, loopcheck.Options{StackBytes: host.Defaults().FrameBound(), Entries: entries})
	return out, err
}

// InstantiateCheck adds to rt the import an instrumented module calls,
// which stops the guest when its call's context has ended or its frames
// passed their bound, as the host's does.
func InstantiateCheck(ctx context.Context, rt wazero.Runtime) error {
	_, err := rt.NewHostModuleBuilder(loopcheck.ImportModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(check), []api.ValueType{api.ValueTypeI32}, nil).
		Export(loopcheck.ImportName).Instantiate(ctx)
	return err
}

var errStack = errors.New("the call's frames passed their bound")

func check(ctx context.Context, _ api.Module, stack []uint64) {
	if int32(stack[0]) < 0 {
		panic(errStack)
	}
	if ctx.Err() != nil {
		panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
	}
}
