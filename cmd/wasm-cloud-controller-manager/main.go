// Command wasm-cloud-controller-manager runs Kubernetes' cloud controllers
// (node, node lifecycle, service load balancer, route) over a provider
// implemented as a WebAssembly module: --cloud-provider=wasm, with
// --cloud-config naming the module and what it is granted.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/internal/ccmcli"
)

func main() {
	cmd, err := ccmcli.NewCommand()
	if err != nil {
		klog.Fatal(err)
	}
	os.Exit(cli.Run(cmd))
}
