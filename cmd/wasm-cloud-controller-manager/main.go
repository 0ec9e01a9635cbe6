// Command wasm-cloud-controller-manager runs Kubernetes' cloud controllers
// (node, node lifecycle, service load balancer, route) over a provider
// implemented as a WebAssembly module: --cloud-provider=wasm, with
// --cloud-config naming the module and what it is granted.
package main

import (
	"context"
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // build info metric
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/provider"
)

func main() {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	cmd := app.NewCloudControllerManagerCommand(opts, initCloud, controllers(),
		names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	os.Exit(cli.Run(cmd))
}

// initCloud builds the provider from --cloud-config, with the cluster's
// last-known-good module at hand. When neither the configured module nor
// the last-known-good can serve, the CCM stops here with the reasons,
// before any controller runs.
func initCloud(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	if shared.Name != provider.ProviderName {
		klog.Fatalf("unknown cloud provider %q; wasm-cloud-controller-manager provides %q", shared.Name, provider.ProviderName)
	}
	if shared.CloudConfigFile == "" {
		klog.Fatalf("cloud provider %q needs --cloud-config", provider.ProviderName)
	}
	cloud, err := provider.Open(context.Background(), shared.CloudConfigFile, c.Kubeconfig)
	if err != nil {
		klog.Fatalf("cloud provider could not be initialized: %v", err)
	}
	return cloud
}
