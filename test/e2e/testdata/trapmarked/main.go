// Command trapmarked is the simcloud provider module with a bug that only
// shows after it is in service: every InstancesV2 call about a Node
// labelled e2e.wasmccm.io/trap=true panics, which traps the instance. The
// tests put the label on once the module has been promoted.
package main

import (
	"context"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/simcloud"
	"github.com/wasmccm/wasmccm/test/e2e/testdata/simvariant"
)

// TrapLabel marks the Nodes whose calls trap.
const TrapLabel = "e2e.wasmccm.io/trap"

type trapMarked struct{ *simcloud.Provider }

func trapIfMarked(node *abi.Node) {
	if node.Labels[TrapLabel] == "true" {
		panic("trapmarked module: call about " + node.Name + " panics on purpose")
	}
}

func (t trapMarked) InstanceExists(ctx context.Context, node *abi.Node) (bool, error) {
	trapIfMarked(node)
	return t.Provider.InstanceExists(ctx, node)
}

func (t trapMarked) InstanceShutdown(ctx context.Context, node *abi.Node) (bool, error) {
	trapIfMarked(node)
	return t.Provider.InstanceShutdown(ctx, node)
}

func (t trapMarked) InstanceMetadata(ctx context.Context, node *abi.Node) (*abi.InstanceMetadata, error) {
	trapIfMarked(node)
	return t.Provider.InstanceMetadata(ctx, node)
}

func init() {
	simvariant.Serve(func(p *simcloud.Provider) sdk.InstancesV2 { return trapMarked{p} })
}

func main() {}
