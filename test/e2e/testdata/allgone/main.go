// Command allgone is the simcloud provider module with the bug a rollout
// must never let through: InstanceExists answers false for every Node,
// which makes the node lifecycle controller delete every NotReady Node.
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

// allGone is the simcloud provider but for InstanceExists.
type allGone struct{ *simcloud.Provider }

// InstanceExists says no instance exists, without asking the cloud.
func (allGone) InstanceExists(context.Context, *abi.Node) (bool, error) { return false, nil }

func init() {
	p := simcloud.New(sdk.Imports())
	sdk.Set(p)
	instancesv2.Set(allGone{p})
	loadbalancer.Set(p)
	routes.Set(p)
	zones.Set(p)
}

func main() {}
