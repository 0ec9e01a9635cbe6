// Package simvariant serves the simcloud provider as a module with its
// InstancesV2 methods replaced: the misbehaving modules of the end-to-end
// tests each change what their instances answer and nothing else.
package simvariant

import (
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
	"github.com/wasmccm/wasmccm/modules/sdk/export/routes"
	"github.com/wasmccm/wasmccm/modules/sdk/export/zones"
	"github.com/wasmccm/wasmccm/modules/simcloud"
)

// Serve registers the simcloud provider, with instances(p) in place of
// its InstancesV2, as the module's exports. Call it from init.
func Serve(instances func(p *simcloud.Provider) sdk.InstancesV2) {
	p := simcloud.New(sdk.Imports())
	sdk.Set(p)
	instancesv2.Set(instances(p))
	loadbalancer.Set(p)
	routes.Set(p)
	zones.Set(p)
}
