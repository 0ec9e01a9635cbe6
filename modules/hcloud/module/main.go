// Command module is the Hetzner Cloud provider as a wasmccm module:
//
//	tinygo build -target=wasip1 -buildmode=c-shared -scheduler=none -gc=leaking -no-debug -opt=2 -o hcloud.wasm ./modules/hcloud/module
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hcloud.wasm ./modules/hcloud/module
//
// It supports InstancesV2, LoadBalancer and Routes.
package main

import (
	"github.com/wasmccm/wasmccm/modules/hcloud"
	"github.com/wasmccm/wasmccm/modules/sdk"
	_ "github.com/wasmccm/wasmccm/modules/sdk/export/deadline" // wait on the cloud until the host's deadline
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancerlist"
	"github.com/wasmccm/wasmccm/modules/sdk/export/routes"
)

func init() {
	p := hcloud.New(sdk.Imports())
	sdk.Set(p)
	instancesv2.Set(p)
	loadbalancer.Set(p)
	loadbalancerlist.Set(p)
	routes.Set(p)
}

func main() {}
