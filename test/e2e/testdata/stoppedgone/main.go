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
	"github.com/wasmccm/wasmccm/modules/simcloud"
	"github.com/wasmccm/wasmccm/test/e2e/testdata/simvariant"
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
	simvariant.Serve(func(p *simcloud.Provider) sdk.InstancesV2 { return stoppedGone{p} })
}

func main() {}
