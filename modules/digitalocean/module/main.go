// Command module is the DigitalOcean provider as a wasmccm module:
//
//	tinygo build -target=wasip1 -buildmode=c-shared -scheduler=none -gc=leaking -no-debug -opt=2 -o digitalocean.wasm ./modules/digitalocean/module
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o digitalocean.wasm ./modules/digitalocean/module
//
// It supports InstancesV2 and LoadBalancer, and lists its load balancers
// for the host's orphan sweep.
package main

import (
	"github.com/wasmccm/wasmccm/modules/digitalocean"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancerlist"
)

func init() {
	p := digitalocean.New(sdk.Imports())
	sdk.Set(p)
	instancesv2.Set(p)
	loadbalancer.Set(p)
	loadbalancerlist.Set(p)
}

func main() {}
