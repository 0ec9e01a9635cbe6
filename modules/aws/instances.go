package aws

import (
	"context"
	"errors"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/aws/internal/xmltree"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/cache"
)

// instance is what the provider reads of an EC2 instance.
type instance struct {
	ID, State, Type, Zone, VpcID  string
	PrivateDNSName, PublicDNSName string
	SecurityGroups                []string
	PrivateIPAddress, PublicIP    string
	SourceDestCheck               bool
	NetworkInterfaces             []networkInterface
}

type networkInterface struct {
	Status      string
	DeviceIndex int
	PrivateIPs  []string
}

// instanceOf reads an <item> of an instancesSet.
func instanceOf(e *xmltree.Element) instance {
	in := instance{
		ID: e.TextOf("instanceId"), State: e.Child("instanceState").TextOf("name"), Type: e.TextOf("instanceType"),
		Zone:           e.Child("placement").TextOf("availabilityZone"),
		PrivateDNSName: e.TextOf("privateDnsName"), PublicDNSName: e.TextOf("dnsName"),
		PrivateIPAddress: e.TextOf("privateIpAddress"), PublicIP: e.TextOf("ipAddress"),
		SourceDestCheck: e.TextOf("sourceDestCheck") == "true", VpcID: e.TextOf("vpcId"),
	}
	for _, g := range e.Items("groupSet") {
		in.SecurityGroups = append(in.SecurityGroups, g.TextOf("groupId"))
	}
	for _, n := range e.Items("networkInterfaceSet") {
		index, _ := strconv.Atoi(n.Child("attachment").TextOf("deviceIndex"))
		nic := networkInterface{Status: n.TextOf("status"), DeviceIndex: index}
		for _, ip := range n.Items("privateIpAddressesSet") {
			nic.PrivateIPs = append(nic.PrivateIPs, ip.TextOf("privateIpAddress"))
		}
		in.NetworkInterfaces = append(in.NetworkInterfaces, nic)
	}
	return in
}

// describeInstances lists every instance params select, across pages.
func (p *Provider) describeInstances(ctx context.Context, what string, params url.Values) ([]instance, error) {
	var all []instance
	err := p.ec2.each(ctx, what, "DescribeInstances", params, func(page *xmltree.Element) {
		for _, r := range page.Items("reservationSet") {
			for _, in := range r.Items("instancesSet") {
				all = append(all, instanceOf(in))
			}
		}
	})
	return all, err
}

// instanceID extracts the instance ID of a provider ID as the official
// CCM writes it ("aws:///us-east-1a/i-0123") or abbreviates it.
func instanceID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, "aws://")
	if !ok {
		return "", errors.New("aws: provider ID " + providerID + " is not an aws:// ID; this module does not manage it")
	}
	id := rest[strings.LastIndexByte(rest, '/')+1:]
	if !strings.HasPrefix(id, "i-") || len(id) < 3 {
		return "", errors.New("aws: provider ID " + providerID + " does not end in an instance ID")
	}
	return id, nil
}

// nodeInstance finds the node's instance, by provider ID or else by its
// name (the private DNS name). It returns nil, nil only when the API said
// so: InvalidInstanceID.NotFound for the provider ID's instance, or the
// instance described as terminated (EC2 describes terminated instances
// for about an hour). A name no instance has is a NotFound error.
func (p *Provider) nodeInstance(ctx context.Context, node *abi.Node) (*instance, error) {
	in, err := p.findInstance(ctx, node)
	if in != nil && in.State == "terminated" {
		return nil, err
	}
	return in, err
}

func (p *Provider) findInstance(ctx context.Context, node *abi.Node) (*instance, error) {
	if node.ProviderID != "" {
		id, err := instanceID(node.ProviderID)
		if err != nil {
			return nil, err
		}
		list, err := p.describeByID(ctx, id)
		if absent(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if in := pick(list, func(in *instance) bool { return in.ID == id }); in != nil {
			return in, nil
		}
		// EC2 answers an ID it does not know with InvalidInstanceID.NotFound
		// and describes a terminated instance for an hour: an answer
		// without the instance is neither, and proves nothing gone.
		return nil, errors.New("aws: DescribeInstances answered without instance " + id + " and without InvalidInstanceID.NotFound")
	}
	list, err := p.describeInstances(ctx, "finding the instance of Node "+node.Name,
		filters(url.Values{}, "private-dns-name", node.Name, "tag-key", p.clusterTag))
	if err != nil {
		return nil, err
	}
	if in := pick(list, func(in *instance) bool { return in.PrivateDNSName == node.Name }); in != nil {
		return in, nil
	}
	// An empty listing is not the API saying the instance is gone (it may
	// not be described yet, or the Node may be named otherwise): like the
	// official CCM, an error, never "gone".
	return nil, notFound("no instance tagged " + p.clusterTag + " has the private DNS name " + node.Name)
}

// pick returns the matching instance, preferring one not terminated:
// private DNS names are reused, and a terminated instance stays listed for
// a while.
func pick(list []instance, match func(*instance) bool) *instance {
	var found *instance
	for i := range list {
		if in := &list[i]; match(in) && (found == nil || found.State == "terminated") {
			found = in
		}
	}
	return found
}

// InstanceExists answers false for an instance the API does not know or
// reports terminated.
func (p *Provider) InstanceExists(ctx context.Context, node *abi.Node) (bool, error) {
	in, err := p.nodeInstance(ctx, node)
	if err != nil {
		return false, err
	}
	if in == nil {
		p.logf(abi.LogInfo, "the instance of Node "+node.Name+" does not exist or is terminated")
		return false, nil
	}
	return true, nil
}

// InstanceShutdown reports a stopped instance; a stopping one is not yet
// shut down, as the official CCM reads it.
func (p *Provider) InstanceShutdown(ctx context.Context, node *abi.Node) (bool, error) {
	in, err := p.nodeInstance(ctx, node)
	if err != nil {
		return false, err
	}
	if in == nil {
		return false, notFound("the instance of Node " + node.Name + " does not exist")
	}
	return in.State == "stopped", nil
}

// InstanceMetadata describes the node's instance as the official CCM
// does.
func (p *Provider) InstanceMetadata(ctx context.Context, node *abi.Node) (*abi.InstanceMetadata, error) {
	in, err := p.nodeInstance(ctx, node)
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, notFound("the instance of Node " + node.Name + " does not exist")
	}
	zone := in.Zone
	md := &abi.InstanceMetadata{
		ProviderID:    "aws:///" + zone + "/" + in.ID,
		InstanceType:  in.Type,
		NodeAddresses: addresses(in),
		Zone:          zone,
		Region:        strings.TrimRight(zone, "abcdefghijklmnopqrstuvwxyz"),
	}
	if _, ok := node.Labels[ZoneIDLabel]; !ok {
		id, err := p.zoneID(ctx, zone)
		if err != nil {
			return nil, err
		}
		md.AdditionalLabels = map[string]string{ZoneIDLabel: id}
	}
	return md, nil
}

// ZoneIDLabel is the official CCM's label for the zone's ID, the same
// physical zone in every account (zone names are shuffled per account).
const ZoneIDLabel = "topology.k8s.aws/zone-id"

// zoneIDsMaxAge is how long the region's zone IDs are kept, shared by all
// the module's instances: they never change, so the module asks once an
// hour rather than once per Node.
const zoneIDsMaxAge = time.Hour

// zoneID returns the ID of the named zone, from the region's zones as
// DescribeAvailabilityZones lists them ("name=id" lines in the host's
// shared state).
func (p *Provider) zoneID(ctx context.Context, zone string) (string, error) {
	zones, err := cache.Once(p.host, "aws/zone-ids", zoneIDsMaxAge, func() ([]byte, error) {
		root, err := p.ec2.call(ctx, "listing the region's zones", "DescribeAvailabilityZones", url.Values{})
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		for _, z := range root.Items("availabilityZoneInfo") {
			b.WriteString(z.TextOf("zoneName") + "=" + z.TextOf("zoneId") + "\n")
		}
		return []byte(b.String()), nil
	})
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(zones), "\n") {
		if name, id, _ := strings.Cut(line, "="); name == zone && id != "" {
			return id, nil
		}
	}
	return "", errors.New("aws: zone " + zone + " is not among the region's zones, so its zone ID is unknown")
}

// addresses lists the private IPs of the attached interfaces, in device
// order, then the public IP, the private DNS name (as InternalDNS and
// Hostname) and the public DNS name.
func addresses(in *instance) []abi.NodeAddress {
	var out []abi.NodeAddress
	add := func(typ, addr string) {
		if addr != "" {
			out = append(out, abi.NodeAddress{Type: typ, Address: addr})
		}
	}
	nics := append([]networkInterface(nil), in.NetworkInterfaces...)
	sort.SliceStable(nics, func(i, j int) bool { return nics[i].DeviceIndex < nics[j].DeviceIndex })
	for _, nic := range nics {
		if nic.Status != "in-use" {
			continue
		}
		for _, ip := range nic.PrivateIPs {
			add("InternalIP", ip)
		}
	}
	if len(out) == 0 {
		add("InternalIP", in.PrivateIPAddress)
	}
	add("ExternalIP", in.PublicIP)
	add("InternalDNS", in.PrivateDNSName)
	add("Hostname", in.PrivateDNSName)
	add("ExternalDNS", in.PublicDNSName)
	return out
}

func notFound(msg string) error { return sdk.NotFound("aws: " + msg) }
