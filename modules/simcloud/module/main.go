// Command module is the simcloud provider as a wasmccm module:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o simcloud.wasm ./modules/simcloud/module
//	tinygo build -target=wasip1 -buildmode=c-shared -scheduler=none -gc=leaking -no-debug -opt=2 -o simcloud.wasm ./modules/simcloud/module
//
// It supports InstancesV2, LoadBalancer, Routes and Zones.
package main

import (
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancerlist"
	"github.com/wasmccm/wasmccm/modules/sdk/export/routes"
	"github.com/wasmccm/wasmccm/modules/sdk/export/zones"
	"github.com/wasmccm/wasmccm/modules/simcloud"
)

func init() {
	p := simcloud.New(sdk.Imports())
	sdk.Set(p)
	instancesv2.Set(p)
	loadbalancer.Set(p)
	loadbalancerlist.Set(p)
	routes.Set(p)
	zones.Set(p)
}

func main() {}
