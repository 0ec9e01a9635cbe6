// Package aws is a wasmccm provider for Amazon EC2, following the
// conventions of the official AWS cloud controller manager
// (kubernetes/cloud-provider-aws), so that a cluster can switch between
// the two without changing its Nodes: provider IDs
// "aws:///<availability zone>/<instance id>", Nodes named after their
// instances' private DNS names, the same addresses, labels and routes.
//
// The same code runs inside the wasm module (modules/aws/module) and
// natively with a Host from package sdk/native. It uses only the standard
// library and the SDK, so it builds with TinyGo as well as with Go. It
// speaks the EC2 Query API (form-encoded requests, XML answers); the host
// signs every request with SigV4 from the credential the config names, so
// the module never holds the access keys.
//
// The provider config is JSON:
//
//	{
//	  "region": "us-east-1",          // required (Global.Region)
//	  "clusterID": "c1",              // required: the kubernetes.io/cluster/<clusterID> tag (Global.KubernetesClusterID)
//	  "credential": "aws",            // the credentials.auth entry (sigv4) requests are signed with
//	  "ec2Endpoint": "https://ec2.us-east-1.amazonaws.com", // default from region (ServiceOverride ec2)
//	  "elbEndpoint": "https://elasticloadbalancing.us-east-1.amazonaws.com", // (ServiceOverride elasticloadbalancing)
//	  "vpcID": "vpc-0123",            // the VPC load balancers go in (Global.VPC); default: the Nodes' instances' VPC
//	  "elbSecurityGroup": "sg-0123",  // one group for every load balancer instead of one made per Service (Global.ElbSecurityGroup)
//	  "requestTimeout": "10s"
//	}
package aws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
)

// DefaultCredential is the credential requests name when the config does
// not name one: a sigv4 entry of the cloud-config's credentials.auth.
const DefaultCredential = "aws"

// Provider implements sdk.Provider, sdk.InstancesV2, sdk.LoadBalancer
// and sdk.Routes against the EC2, Classic ELB and ELBv2 (NLB) APIs.
type Provider struct {
	host            sdk.Host
	cfg             config
	ec2, elb, elbv2 queryAPI
	// clusterTag is the tag key marking the cluster's resources.
	clusterTag string
}

var (
	_ sdk.Provider           = (*Provider)(nil)
	_ sdk.InstancesV2        = (*Provider)(nil)
	_ sdk.Routes             = (*Provider)(nil)
	_ sdk.LoadBalancer       = (*Provider)(nil)
	_ sdk.LoadBalancerLister = (*Provider)(nil)
)

// New returns a provider that reaches the cloud through host. It must be
// initialized with Init before use.
func New(host sdk.Host) *Provider { return &Provider{host: host} }

type config struct {
	Region           string  `json:"region"`
	ClusterID        string  `json:"clusterID"`
	Credential       *string `json:"credential"`
	EC2Endpoint      string  `json:"ec2Endpoint"`
	ELBEndpoint      string  `json:"elbEndpoint"`
	VpcID            string  `json:"vpcID"`
	ELBSecurityGroup string  `json:"elbSecurityGroup"`
	RequestTimeout   string  `json:"requestTimeout"`
}

// Init parses the provider config. It does not contact the cloud, so an
// unreachable API at start-up does not make the module unusable.
func (p *Provider) Init(_ context.Context, _ string, raw []byte) error {
	var cfg config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return errors.New("aws: parsing provider config: " + err.Error())
	}
	if cfg.Region == "" || cfg.ClusterID == "" {
		return errors.New(`aws: provider config: region and clusterID are required, e.g. {"region": "us-east-1", "clusterID": "my-cluster"}`)
	}
	if cfg.EC2Endpoint == "" {
		cfg.EC2Endpoint = "https://ec2." + cfg.Region + ".amazonaws.com"
	}
	if cfg.ELBEndpoint == "" {
		cfg.ELBEndpoint = "https://elasticloadbalancing." + cfg.Region + ".amazonaws.com"
	}
	for _, e := range []struct{ name, url string }{{"ec2Endpoint", cfg.EC2Endpoint}, {"elbEndpoint", cfg.ELBEndpoint}} {
		if !strings.HasPrefix(e.url, "https://") && !strings.HasPrefix(e.url, "http://") || strings.ContainsAny(e.url, "?# \t\r\n") {
			return errors.New("aws: provider config: " + e.name + " " + strconv.Quote(e.url) + " must be an http(s) URL without query or fragment")
		}
	}
	var timeout time.Duration
	if cfg.RequestTimeout != "" {
		d, err := time.ParseDuration(cfg.RequestTimeout)
		if err != nil || d <= 0 {
			return errors.New("aws: provider config: requestTimeout " + strconv.Quote(cfg.RequestTimeout) + " is not a positive duration such as \"10s\"")
		}
		timeout = d
	}
	credential := DefaultCredential
	if cfg.Credential != nil {
		credential = *cfg.Credential
	}
	p.cfg = cfg
	p.clusterTag = "kubernetes.io/cluster/" + cfg.ClusterID
	p.ec2 = queryAPI{host: p.host, endpoint: strings.TrimRight(cfg.EC2Endpoint, "/"), version: ec2Version,
		service: "ec2", region: cfg.Region, credential: credential, timeout: timeout}
	p.elb = p.ec2
	p.elb.endpoint, p.elb.version, p.elb.service = strings.TrimRight(cfg.ELBEndpoint, "/"), elbVersion, "elasticloadbalancing"
	// Network load balancers are ELB's version 2, at the same endpoint.
	p.elbv2 = p.elb
	p.elbv2.version = nlbVersion
	p.logf(abi.LogInfo, "using EC2 endpoint "+p.ec2.endpoint+" and ELB endpoint "+p.elb.endpoint+" in "+cfg.Region+" for cluster "+cfg.ClusterID)
	return nil
}

func (p *Provider) logf(level abi.LogLevel, msg string) {
	if p.host.LogEnabled(level) {
		p.host.Log(level, "aws: "+msg)
	}
}
