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
// boundary to re-read it across). Only InstancesV2, LoadBalancer and Zones
// are adapted; the scale test runs without the route controller.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
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
	token, err := os.ReadFile(cfg.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("cloud-config: tokenFile: %w", err)
	}
	// The same transport settings as runtime/host's guarded transport.
	transport := &http.Transport{
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
	}
	p := simcloud.New(&native.Host{Transport: transport, Credentials: map[string]string{"token": strings.TrimSpace(string(token))}})
	providerConfig := fmt.Appendf(nil, `{"endpoint": %q, "tokenCredential": "token"}`, cfg.Endpoint)
	if err := p.Init(context.Background(), cfg.ClusterName, providerConfig); err != nil {
		return nil, err
	}
	return &cloud{p: p}, nil
}

// cloud adapts *simcloud.Provider, which speaks the ABI's wire types, to
// cloudprovider.Interface, with the conversions and error mapping of
// runtime/provider (duplicated here: that package does not export them).
type cloud struct{ p *simcloud.Provider }

var (
	_ cloudprovider.Interface    = (*cloud)(nil)
	_ cloudprovider.InstancesV2  = (*cloud)(nil)
	_ cloudprovider.LoadBalancer = (*cloud)(nil)
	_ cloudprovider.Zones        = (*cloud)(nil)
)

func (c *cloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (c *cloud) ProviderName() string                                              { return ProviderName }
func (c *cloud) HasClusterID() bool                                                { return true }
func (c *cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return c, true }
func (c *cloud) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (c *cloud) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return c, true }
func (c *cloud) Zones() (cloudprovider.Zones, bool)                                { return c, true }
func (c *cloud) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (c *cloud) Routes() (cloudprovider.Routes, bool)                              { return nil, false }

// ---- InstancesV2 ----

func (c *cloud) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	n := toNode(node)
	ok, err := c.p.InstanceExists(ctx, &n)
	return ok && err == nil, mapError(err, false)
}

func (c *cloud) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	n := toNode(node)
	ok, err := c.p.InstanceShutdown(ctx, &n)
	return ok && err == nil, mapError(err, false)
}

func (c *cloud) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	n := toNode(node)
	meta, err := c.p.InstanceMetadata(ctx, &n)
	if err != nil {
		return nil, mapError(err, true)
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:       meta.ProviderID,
		InstanceType:     meta.InstanceType,
		NodeAddresses:    fromAddresses(meta.NodeAddresses),
		Zone:             meta.Zone,
		Region:           meta.Region,
		AdditionalLabels: meta.AdditionalLabels,
	}, nil
}

// ---- Zones ----

func (c *cloud) GetZone(ctx context.Context) (cloudprovider.Zone, error) {
	z, err := c.p.GetZone(ctx)
	return cloudprovider.Zone{FailureDomain: z.FailureDomain, Region: z.Region}, mapError(err, true)
}

func (c *cloud) GetZoneByProviderID(ctx context.Context, providerID string) (cloudprovider.Zone, error) {
	z, err := c.p.GetZoneByProviderID(ctx, providerID)
	return cloudprovider.Zone{FailureDomain: z.FailureDomain, Region: z.Region}, mapError(err, true)
}

func (c *cloud) GetZoneByNodeName(ctx context.Context, nodeName types.NodeName) (cloudprovider.Zone, error) {
	z, err := c.p.GetZoneByNodeName(ctx, string(nodeName))
	return cloudprovider.Zone{FailureDomain: z.FailureDomain, Region: z.Region}, mapError(err, true)
}

// ---- LoadBalancer ----

func (c *cloud) GetLoadBalancer(ctx context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	s := toService(svc)
	status, exists, err := c.p.GetLoadBalancer(ctx, "", &s)
	if err != nil {
		return nil, false, mapError(err, false)
	}
	if !exists || status == nil {
		return nil, false, nil
	}
	return fromLBStatus(status), true, nil
}

func (c *cloud) GetLoadBalancerName(ctx context.Context, _ string, svc *v1.Service) string {
	s := toService(svc)
	if name := c.p.GetLoadBalancerName(ctx, "", &s); name != "" {
		return name
	}
	return cloudprovider.DefaultLoadBalancerName(svc)
}

func (c *cloud) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	s := toService(svc)
	status, err := c.p.EnsureLoadBalancer(ctx, clusterName, &s, toNodes(nodes))
	if err != nil {
		return nil, mapError(err, false)
	}
	if status == nil {
		return nil, errors.New("provider answered no load balancer status")
	}
	return fromLBStatus(status), nil
}

func (c *cloud) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	s := toService(svc)
	return mapError(c.p.UpdateLoadBalancer(ctx, clusterName, &s, toNodes(nodes)), false)
}

func (c *cloud) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	s := toService(svc)
	err := mapError(c.p.EnsureLoadBalancerDeleted(ctx, clusterName, &s), false)
	if errors.Is(err, cloudprovider.ImplementedElsewhere) {
		return errors.New("provider answered ImplementedElsewhere to EnsureLoadBalancerDeleted")
	}
	return err
}

// ---- errors, as runtime/provider maps module statuses ----

// mapError maps a provider error as runtime/provider maps the status the
// SDK would have encoded it as. notFoundIsInstanceNotFound is true for the
// methods whose NotFound the controllers expect as InstanceNotFound.
func mapError(err error, notFoundIsInstanceNotFound bool) error {
	switch {
	case err == nil:
		return nil
	case retryDelay(err) > 0:
		return api.NewRetryError(err.Error(), retryDelay(err))
	case errors.Is(err, sdk.ErrNotFound):
		if notFoundIsInstanceNotFound {
			return cloudprovider.InstanceNotFound
		}
	case errors.Is(err, sdk.ErrNotImplemented):
		return cloudprovider.NotImplemented
	case errors.Is(err, sdk.ErrImplementedElsewhere):
		return cloudprovider.ImplementedElsewhere
	}
	return fmt.Errorf("provider: %w", err)
}

// retryDelay returns the delay of an error made by sdk.RetryAfter, or 0.
// The SDK keeps that type internal, so its exported After field is read by
// reflection.
func retryDelay(err error) time.Duration {
	for e := err; e != nil; e = errors.Unwrap(e) {
		v := reflect.ValueOf(e)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			continue
		}
		if f := v.Elem().FieldByName("After"); f.IsValid() && f.Type() == reflect.TypeFor[time.Duration]() {
			return time.Duration(f.Int())
		}
	}
	return 0
}

// ---- conversions (those of runtime/provider/convert.go) ----

func toNode(n *v1.Node) abi.Node {
	if n == nil {
		return abi.Node{}
	}
	return abi.Node{
		Name:        n.Name,
		UID:         string(n.UID),
		ProviderID:  n.Spec.ProviderID,
		Labels:      n.Labels,
		Annotations: n.Annotations,
		Addresses:   toAddresses(n.Status.Addresses),
		PodCIDRs:    n.Spec.PodCIDRs,
	}
}

func toNodes(nodes []*v1.Node) []abi.Node {
	out := make([]abi.Node, len(nodes))
	for i, n := range nodes {
		out[i] = toNode(n)
	}
	return out
}

func toAddresses(in []v1.NodeAddress) []abi.NodeAddress {
	if len(in) == 0 {
		return nil
	}
	out := make([]abi.NodeAddress, len(in))
	for i, a := range in {
		out[i] = abi.NodeAddress{Type: string(a.Type), Address: a.Address}
	}
	return out
}

func fromAddresses(in []abi.NodeAddress) []v1.NodeAddress {
	if len(in) == 0 {
		return nil
	}
	out := make([]v1.NodeAddress, len(in))
	for i, a := range in {
		out[i] = v1.NodeAddress{Type: v1.NodeAddressType(a.Type), Address: a.Address}
	}
	return out
}

func toService(s *v1.Service) abi.Service {
	out := abi.Service{
		Namespace:                s.Namespace,
		Name:                     s.Name,
		UID:                      string(s.UID),
		Annotations:              s.Annotations,
		LoadBalancerIP:           s.Spec.LoadBalancerIP,
		ExternalTrafficPolicy:    string(s.Spec.ExternalTrafficPolicy),
		LoadBalancerSourceRanges: s.Spec.LoadBalancerSourceRanges,
		HealthCheckNodePort:      s.Spec.HealthCheckNodePort,
		Status:                   toLBStatus(&s.Status.LoadBalancer),
	}
	if s.Spec.LoadBalancerClass != nil {
		out.LoadBalancerClass = *s.Spec.LoadBalancerClass
	}
	for _, f := range s.Spec.IPFamilies {
		out.IPFamilies = append(out.IPFamilies, string(f))
	}
	for _, p := range s.Spec.Ports {
		out.Ports = append(out.Ports, abi.ServicePort{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port, NodePort: p.NodePort})
	}
	return out
}

func toLBStatus(s *v1.LoadBalancerStatus) abi.LoadBalancerStatus {
	var out abi.LoadBalancerStatus
	for _, in := range s.Ingress {
		ing := abi.LoadBalancerIngress{IP: in.IP, Hostname: in.Hostname}
		if in.IPMode != nil {
			ing.IPMode = string(*in.IPMode)
		}
		out.Ingress = append(out.Ingress, ing)
	}
	return out
}

func fromLBStatus(s *abi.LoadBalancerStatus) *v1.LoadBalancerStatus {
	out := &v1.LoadBalancerStatus{}
	for _, in := range s.Ingress {
		ing := v1.LoadBalancerIngress{IP: in.IP, Hostname: in.Hostname}
		if in.IPMode != "" {
			mode := v1.LoadBalancerIPMode(in.IPMode)
			ing.IPMode = &mode
		}
		out.Ingress = append(out.Ingress, ing)
	}
	return out
}
