// Command allgone is the simcloud provider module with the bug a rollout
// must never let through: InstanceExists answers false for every Node,
// which makes the node lifecycle controller delete every NotReady Node.
package main

import (
	"context"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/simcloud"
	"github.com/wasmccm/wasmccm/test/e2e/testdata/simvariant"
)

// allGone is the simcloud provider but for InstanceExists.
type allGone struct{ *simcloud.Provider }

// InstanceExists says no instance exists, without asking the cloud.
func (allGone) InstanceExists(context.Context, *abi.Node) (bool, error) { return false, nil }

func init() {
	simvariant.Serve(func(p *simcloud.Provider) sdk.InstancesV2 { return allGone{p} })
}

func main() {}
