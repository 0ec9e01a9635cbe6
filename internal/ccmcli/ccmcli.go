// Package ccmcli is wasm-cloud-controller-manager's command line: the
// upstream cloud-controller-manager command over provider "wasm", with
// the orphan load balancer sweep among its controllers (sweep.go), and
// the Node and service controllers run once per module (nodes.go,
// services.go).
// cmd/wasm-cloud-controller-manager runs it, and docs/reference/cli.md
// lists its flags.
package ccmcli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // build info metric
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/assembly"
	"github.com/wasmccm/wasmccm/runtime/provider"
)

// NewCommand is the wasm-cloud-controller-manager command.
func NewCommand() (*cobra.Command, error) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		return nil, fmt.Errorf("unable to initialize command options: %w", err)
	}
	return app.NewCloudControllerManagerCommand(opts, initCloud, controllers(),
		names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop), nil
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
	cloud, err := assembly.Open(context.Background(), shared.CloudConfigFile, c.Kubeconfig)
	if err != nil {
		klog.Fatalf("cloud provider could not be initialized: %v", err)
	}
	return cloud
}

// assembled is the cloud initCloud built: the controllers' constructors
// are given it as a cloudprovider.Interface.
func assembled(cloud cloudprovider.Interface) *assembly.Cloud { return cloud.(*assembly.Cloud) }
