// Command trapping is the simcloud provider module with an InstanceExists
// that panics. A Go panic in a wasm export traps the instance, so every
// InstanceExists call ends without an answer: the host must replace the
// instance and report an error, which must never be read as "the instance
// does not exist" (that answer deletes the Node).
package main

import (
	"context"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/simcloud"
	"github.com/wasmccm/wasmccm/test/e2e/testdata/simvariant"
)

// trapping is the simcloud provider but for InstanceExists.
type trapping struct{ *simcloud.Provider }

// InstanceExists panics before contacting the cloud.
func (trapping) InstanceExists(_ context.Context, node *abi.Node) (bool, error) {
	panic("trapping module: InstanceExists(" + node.Name + ") panics on purpose")
}

func init() {
	simvariant.Serve(func(p *simcloud.Provider) sdk.InstancesV2 { return trapping{p} })
}

func main() {}
