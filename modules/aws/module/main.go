// Command module is the Amazon EC2 provider as a wasmccm module:
//
//	tinygo build -target=wasip1 -buildmode=c-shared -scheduler=none -gc=leaking -no-debug -opt=2 -o aws.wasm ./modules/aws/module
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o aws.wasm ./modules/aws/module
//
// It supports InstancesV2, LoadBalancer (Classic ELB and NLB) and Routes.
package main

import (
	"github.com/wasmccm/wasmccm/modules/aws"
	"github.com/wasmccm/wasmccm/modules/sdk"
	_ "github.com/wasmccm/wasmccm/modules/sdk/export/deadline" // requests end in time for the call's answer
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancerlist"
	"github.com/wasmccm/wasmccm/modules/sdk/export/routes"
)

func init() {
	p := aws.New(sdk.Imports())
	sdk.Set(p)
	instancesv2.Set(p)
	loadbalancer.Set(p)
	loadbalancerlist.Set(p)
	routes.Set(p)
}

func main() {}
