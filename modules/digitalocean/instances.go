package digitalocean

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
)

// ProviderIDPrefix is the scheme of droplet provider IDs: droplet 42 is
// "digitalocean://42", as the official CCM writes it.
const ProviderIDPrefix = "digitalocean://"

// dropletID parses a provider ID. Another cloud's ID is an error, never
// "does not exist".
func dropletID(providerID string) (int64, error) {
	rest, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok {
		return 0, errors.New("digitalocean: provider ID " + strconv.Quote(providerID) + " is not a droplet's (\"" + ProviderIDPrefix + "<id>\")")
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id <= 0 {
		return 0, errors.New("digitalocean: provider ID " + strconv.Quote(providerID) + " has no valid droplet ID")
	}
	return id, nil
}

// lookupDroplet finds the node's droplet: by provider ID when the Node has
// one, else by name. It returns nil only when the API answered that no
// such droplet exists (droplets.go).
func (p *Provider) lookupDroplet(ctx context.Context, node *abi.Node) (*droplet, error) {
	if node.ProviderID == "" {
		return p.dropletByName(ctx, node.Name)
	}
	id, err := dropletID(node.ProviderID)
	if err != nil {
		return nil, err
	}
	return p.dropletByID(ctx, id)
}

// existing is lookupDroplet for calls that need the droplet: its absence
// is sdk.ErrNotFound.
func (p *Provider) existing(ctx context.Context, node *abi.Node) (*droplet, error) {
	d, err := p.lookupDroplet(ctx, node)
	if err == nil && d == nil {
		err = sdk.NotFound("digitalocean: no droplet found for node " + strconv.Quote(node.Name))
	}
	return d, err
}

// InstanceExists implements sdk.InstancesV2. Only the API's own answer
// that the droplet does not exist returns false.
func (p *Provider) InstanceExists(ctx context.Context, node *abi.Node) (bool, error) {
	d, err := p.lookupDroplet(ctx, node)
	return d != nil, err
}

// InstanceShutdown implements sdk.InstancesV2: a droplet is shut down when
// its status is "off".
func (p *Provider) InstanceShutdown(ctx context.Context, node *abi.Node) (bool, error) {
	d, err := p.existing(ctx, node)
	if err != nil {
		return false, err
	}
	return d.Status == "off", nil
}

// InstanceMetadata implements sdk.InstancesV2 with the official CCM's
// values: type = size slug, region = region slug, no zone.
func (p *Provider) InstanceMetadata(ctx context.Context, node *abi.Node) (*abi.InstanceMetadata, error) {
	d, err := p.existing(ctx, node)
	if err != nil {
		return nil, err
	}
	addrs, err := addresses(d)
	if err != nil {
		return nil, errors.New("digitalocean: node " + strconv.Quote(node.Name) + ": " + err.Error())
	}
	return &abi.InstanceMetadata{
		ProviderID:    ProviderIDPrefix + strconv.FormatInt(d.ID, 10),
		InstanceType:  d.SizeSlug,
		Region:        d.Region.Slug,
		NodeAddresses: addrs,
	}, nil
}

// addresses lists the droplet's addresses as the official CCM publishes
// them: the host name, the private IPv4 (required), then the public IPv4
// and IPv6 where the droplet has them.
func addresses(d *droplet) ([]abi.NodeAddress, error) {
	private := address(d.Networks.V4, "private")
	if private == "" {
		return nil, errors.New("droplet " + strconv.FormatInt(d.ID, 10) + " has no private IPv4 address")
	}
	out := []abi.NodeAddress{{Type: "Hostname", Address: d.Name}, {Type: "InternalIP", Address: private}}
	for _, ip := range []string{address(d.Networks.V4, "public"), address(d.Networks.V6, "public")} {
		if ip != "" {
			out = append(out, abi.NodeAddress{Type: "ExternalIP", Address: ip})
		}
	}
	return out, nil
}
