// Command nativeccm is the cloud controller manager of the scale test's
// baseline: the same upstream controllers and the same provider code as
// wasm-cloud-controller-manager with the simcloud module, but with
// modules/simcloud compiled into the binary and called directly, as an
// in-tree provider would be. It registers --cloud-provider=simcloud-native.
//
// Its --cloud-config is YAML:
//
//	clusterName: scale
//	endpoint: http://127.0.0.1:8780
//	tokenFile: /path/to/token
//
// The token is read once at start (a compiled-in provider has no module
// boundary to re-read it across). The controllers-facing adapter is
// runtime/provider's, over a backend that calls the provider directly.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register"          // as in the wasm CCM
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // as in the wasm CCM
	_ "k8s.io/component-base/metrics/prometheus/version"  // as in the wasm CCM
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
	"github.com/wasmccm/wasmccm/modules/simcloud"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/provider"
)

// ProviderName is the --cloud-provider this binary registers.
const ProviderName = "simcloud-native"

func main() {
	cloudprovider.RegisterCloudProvider(ProviderName, newCloud)
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	cmd := app.NewCloudControllerManagerCommand(opts, initCloud, app.DefaultInitFuncConstructors,
		names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	os.Exit(cli.Run(cmd))
}

func initCloud(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err != nil {
		klog.Fatalf("cloud provider could not be initialized: %v", err)
	}
	if cloud == nil {
		klog.Fatalf("unknown cloud provider %q; this binary provides %q", shared.Name, ProviderName)
	}
	return cloud
}

type cloudConfig struct {
	ClusterName string `json:"clusterName"`
	Endpoint    string `json:"endpoint"`
	TokenFile   string `json:"tokenFile"`
}

func newCloud(r io.Reader) (cloudprovider.Interface, error) {
	if r == nil {
		return nil, errors.New(ProviderName + " needs --cloud-config")
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var cfg cloudConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("cloud-config: %w", err)
	}
	endpoint, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("cloud-config: endpoint: %w", err)
	}
	// The same transport settings as runtime/host's guarded transport.
	transport := &http.Transport{
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
	}
	// The token is applied by runtime/host's own code, as for the module.
	auth, err := credentials.NewTransport(ProviderName, credentials.Config{Dir: filepath.Dir(cfg.TokenFile), Auth: []credentials.AuthConfig{{
		Name: "token", Origins: []string{endpoint.Scheme + "://" + endpoint.Host}, Bearer: &credentials.BearerAuth{Key: filepath.Base(cfg.TokenFile)},
	}}}, transport)
	if err != nil {
		return nil, err
	}
	p := simcloud.New(&native.Host{Transport: auth})
	providerConfig := fmt.Appendf(nil, `{"endpoint": %q, "tokenCredential": "token"}`, cfg.Endpoint)
	if err := p.Init(context.Background(), cfg.ClusterName, providerConfig); err != nil {
		return nil, err
	}
	return provider.NewWithBackend(&cloudconfig.Config{ClusterName: cfg.ClusterName}, linked{p}), nil
}

// linked serves the ABI's methods by calling the provider directly, with
// the SDK's own error-to-status mapping. runtime/provider puts the same
// controllers-facing adapter over it as over a module, so the two CCMs
// differ only in where the provider code runs.
type linked struct{ p *simcloud.Provider }

var _ provider.Backend = linked{}

func (linked) Info() host.Info {
	return host.Info{ABIVersion: abi.Version, Capabilities: []abi.Capability{
		abi.CapabilityInstancesV2, abi.CapabilityLoadBalancer, abi.CapabilityRoutes, abi.CapabilityZones,
	}}
}

func (linked) Close(context.Context) error { return nil }

func (l linked) Call(ctx context.Context, export string, in, out abi.Message) error {
	err := l.dispatch(ctx, export, in, out)
	if err != nil {
		return &host.StatusError{Export: export, Outcome: sdk.OutcomeOf(err)}
	}
	return nil
}

func (l linked) dispatch(ctx context.Context, export string, in, out abi.Message) error {
	var err error
	switch export {
	case abi.ExportInstanceExists:
		var ok bool
		ok, err = l.p.InstanceExists(ctx, in.(*abi.Node))
		*out.(*abi.Bool) = abi.Bool(ok)
	case abi.ExportInstanceShutdown:
		var ok bool
		ok, err = l.p.InstanceShutdown(ctx, in.(*abi.Node))
		*out.(*abi.Bool) = abi.Bool(ok)
	case abi.ExportInstanceMetadata:
		var meta *abi.InstanceMetadata
		if meta, err = l.p.InstanceMetadata(ctx, in.(*abi.Node)); meta != nil {
			*out.(*abi.InstanceMetadata) = *meta
		}
	case abi.ExportGetLoadBalancer:
		req, res := in.(*abi.LoadBalancerRequest), out.(*abi.GetLoadBalancerResult)
		var status *abi.LoadBalancerStatus
		status, res.Exists, err = l.p.GetLoadBalancer(ctx, req.ClusterName, &req.Service)
		if status != nil {
			res.Status = *status
		}
	case abi.ExportGetLoadBalancerName:
		req := in.(*abi.LoadBalancerRequest)
		*out.(*abi.String) = abi.String(l.p.GetLoadBalancerName(ctx, req.ClusterName, &req.Service))
	case abi.ExportEnsureLoadBalancer:
		req := in.(*abi.LoadBalancerRequest)
		var status *abi.LoadBalancerStatus
		if status, err = l.p.EnsureLoadBalancer(ctx, req.ClusterName, &req.Service, req.Nodes); status != nil {
			*out.(*abi.LoadBalancerStatus) = *status
		}
	case abi.ExportUpdateLoadBalancer:
		req := in.(*abi.LoadBalancerRequest)
		err = l.p.UpdateLoadBalancer(ctx, req.ClusterName, &req.Service, req.Nodes)
	case abi.ExportEnsureLoadBalancerDeleted:
		req := in.(*abi.LoadBalancerRequest)
		err = l.p.EnsureLoadBalancerDeleted(ctx, req.ClusterName, &req.Service)
	case abi.ExportListRoutes:
		var routes []abi.Route
		routes, err = l.p.ListRoutes(ctx, in.(*abi.RouteRequest).ClusterName)
		*out.(*abi.Routes) = routes
	case abi.ExportCreateRoute:
		req := in.(*abi.RouteRequest)
		err = l.p.CreateRoute(ctx, req.ClusterName, req.NameHint, &req.Route)
	case abi.ExportDeleteRoute:
		req := in.(*abi.RouteRequest)
		err = l.p.DeleteRoute(ctx, req.ClusterName, &req.Route)
	case abi.ExportGetZone:
		*out.(*abi.Zone), err = l.p.GetZone(ctx)
	case abi.ExportGetZoneByProviderID:
		*out.(*abi.Zone), err = l.p.GetZoneByProviderID(ctx, string(*in.(*abi.String)))
	case abi.ExportGetZoneByNodeName:
		*out.(*abi.Zone), err = l.p.GetZoneByNodeName(ctx, string(*in.(*abi.String)))
	default:
		return sdk.ErrNotImplemented
	}
	return err
}
