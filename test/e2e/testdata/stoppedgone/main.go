// Command stoppedgone is the simcloud provider module with a subtler bug
// than allgone: it reads a stopped instance as a terminated one, so
// InstanceExists answers false for exactly the Nodes that are NotReady
// because their machine is stopped, and true for every running one. A
// control probe of Ready Nodes cannot tell it from a correct module; the
// previous module's second opinion can.
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

// stoppedGone is the simcloud provider but for InstanceExists.
type stoppedGone struct{ *simcloud.Provider }

// InstanceExists answers false for a stopped instance.
func (p stoppedGone) InstanceExists(ctx context.Context, node *abi.Node) (bool, error) {
	exists, err := p.Provider.InstanceExists(ctx, node)
	if err != nil || !exists {
		return exists, err
	}
	stopped, err := p.InstanceShutdown(ctx, node)
	return err == nil && !stopped, err
}

func init() {
	p := simcloud.New(sdk.Imports())
	sdk.Set(p)
	instancesv2.Set(stoppedGone{p})
	loadbalancer.Set(p)
	routes.Set(p)
	zones.Set(p)
}

func main() {}
