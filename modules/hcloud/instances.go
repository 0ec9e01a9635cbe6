package hcloud

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
)

// ProviderIDPrefix is the scheme of cloud server provider IDs: server 42
// is "hcloud://42", as the official CCM writes it.
const ProviderIDPrefix = "hcloud://"

// ProvidedByLabel tells cloud servers from Robot servers; the official CCM
// sets it to "cloud" on every cloud server's Node.
const ProvidedByLabel = "instance.hetzner.cloud/provided-by"

// serverID parses a provider ID. Robot IDs ("hrobot://N", and the legacy
// "hcloud://bm-N") are rejected with an error: this provider does not
// manage dedicated servers, and must not call them gone.
func serverID(providerID string) (int64, error) {
	rest, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok || strings.HasPrefix(rest, "bm-") {
		return 0, errors.New("hcloud: provider ID " + strconv.Quote(providerID) + " is not a cloud server's (\"hcloud://<id>\"); Robot servers are not supported")
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id <= 0 {
		return 0, errors.New("hcloud: provider ID " + strconv.Quote(providerID) + " has no valid server ID")
	}
	return id, nil
}

// lookupServer finds the node's server: by provider ID when the Node has
// one, else by name. It returns nil only when the API answered that no such
// server exists (servers.go).
func (p *Provider) lookupServer(ctx context.Context, node *abi.Node) (*server, error) {
	if node.ProviderID != "" {
		id, err := serverID(node.ProviderID)
		if err != nil {
			return nil, err
		}
		return p.serverByID(ctx, id, p.serverMaxAge, "node "+strconv.Quote(node.Name))
	}
	return p.serverByName(ctx, node.Name, p.serverMaxAge)
}

// InstanceExists implements sdk.InstancesV2. Only the API's own answer
// that the server does not exist returns false.
func (p *Provider) InstanceExists(ctx context.Context, node *abi.Node) (bool, error) {
	s, err := p.lookupServer(ctx, node)
	return s != nil, err
}

// InstanceShutdown implements sdk.InstancesV2: a server is shut down when
// its status is "off".
func (p *Provider) InstanceShutdown(ctx context.Context, node *abi.Node) (bool, error) {
	s, err := p.lookupServer(ctx, node)
	if err != nil {
		return false, err
	}
	if s == nil {
		return false, sdk.NotFound("hcloud: no server found for node " + strconv.Quote(node.Name))
	}
	return s.Status == "off", nil
}

// InstanceMetadata implements sdk.InstancesV2 with the official CCM's
// values: type = server type, region = location, zone = the location's
// legacy datacenter name, and the provided-by label.
func (p *Provider) InstanceMetadata(ctx context.Context, node *abi.Node) (*abi.InstanceMetadata, error) {
	s, err := p.lookupServer(ctx, node)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, sdk.NotFound("hcloud: no server found for node " + strconv.Quote(node.Name))
	}
	networkID, err := p.network(ctx)
	if err != nil {
		return nil, err
	}
	md := &abi.InstanceMetadata{
		ProviderID:       ProviderIDPrefix + strconv.FormatInt(s.ID, 10),
		InstanceType:     s.ServerType.Name,
		NodeAddresses:    p.addresses(s, networkID),
		Region:           s.Location.Name,
		AdditionalLabels: map[string]string{ProvidedByLabel: "cloud"},
	}
	if *p.cfg.ZoneLabel {
		md.Zone = legacyDatacenter(s.Location.Name)
	}
	return md, nil
}

// addresses lists the host name, the public addresses of the configured
// family and the private address in the configured network, in that order.
func (p *Provider) addresses(s *server, networkID int64) []abi.NodeAddress {
	out := []abi.NodeAddress{{Type: "Hostname", Address: s.Name}}
	family := p.cfg.AddressFamily
	if v4 := s.PublicNet.IPv4; (family == "ipv4" || family == "dualstack") && v4 != nil && v4.IP != "" && v4.IP != "0.0.0.0" {
		out = append(out, abi.NodeAddress{Type: "ExternalIP", Address: v4.IP})
	}
	if v6 := s.PublicNet.IPv6; (family == "ipv6" || family == "dualstack") && v6 != nil {
		// The API gives the server's /64; its address is the network's ::1.
		if prefix, err := netip.ParsePrefix(v6.IP); err == nil {
			b := prefix.Masked().Addr().As16()
			b[15] |= 1
			out = append(out, abi.NodeAddress{Type: "ExternalIP", Address: netip.AddrFrom16(b).String()})
		}
	}
	if networkID != 0 {
		for _, pn := range s.PrivateNet {
			if pn.Network == networkID {
				out = append(out, abi.NodeAddress{Type: "InternalIP", Address: pn.IP})
			}
		}
	}
	return out
}

// legacyDatacenter names the datacenter the official CCM reports as a
// location's zone, for Nodes labelled before datacenters were phased out.
func legacyDatacenter(location string) string {
	switch location {
	case "nbg1":
		return "nbg1-dc3"
	case "hel1":
		return "hel1-dc2"
	case "fsn1":
		return "fsn1-dc14"
	case "ash":
		return "ash-dc1"
	case "hil":
		return "hil-dc1"
	case "sin":
		return "sin-dc1"
	}
	return location
}
