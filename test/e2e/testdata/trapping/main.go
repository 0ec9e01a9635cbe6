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
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
	"github.com/wasmccm/wasmccm/modules/sdk/export/routes"
	"github.com/wasmccm/wasmccm/modules/sdk/export/zones"
	"github.com/wasmccm/wasmccm/modules/simcloud"
)

// trapping is the simcloud provider but for InstanceExists.
type trapping struct{ *simcloud.Provider }

// InstanceExists panics before contacting the cloud.
func (trapping) InstanceExists(_ context.Context, node *abi.Node) (bool, error) {
	panic("trapping module: InstanceExists(" + node.Name + ") panics on purpose")
}

func init() {
	p := simcloud.New(sdk.Imports())
	sdk.Set(p)
	instancesv2.Set(trapping{p})
	loadbalancer.Set(p)
	routes.Set(p)
	zones.Set(p)
}

func main() {}
