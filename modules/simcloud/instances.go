package simcloud

import (
	"context"
	"errors"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/cache"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// instance is the part of a simcloud instance the provider reads.
type instance struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Zone      string            `json:"zone"`
	Region    string            `json:"region"`
	Type      string            `json:"type"`
	State     string            `json:"state"`
	Addresses []address         `json:"addresses"`
	Labels    map[string]string `json:"labels"`
}

type address struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// ProviderID returns the Kubernetes provider ID of the instance.
func (in *instance) ProviderID() string { return ProviderIDPrefix + in.ID }

// ParseProviderID returns the instance ID of a simcloud provider ID. It
// fails for provider IDs of other clouds and for malformed ones.
func ParseProviderID(providerID string) (string, error) {
	id, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok {
		return "", errors.New("simcloud: provider ID " + quote(providerID) + " is not a simcloud one (want " + ProviderIDPrefix + "<instance id>)")
	}
	if !validName(id) {
		return "", errors.New("simcloud: provider ID " + quote(providerID) + " has a malformed instance ID")
	}
	return id, nil
}

// instanceByID gets an instance. It returns (nil, nil) only when the cloud
// answered that the instance does not exist.
func (p *Provider) instanceByID(ctx context.Context, id string) (*instance, error) {
	what := "getting instance " + id
	path := "/v1/instances/" + rest.PathEscape(id)
	in, err := getOne[instance](p, ctx, what, path)
	if err == nil && in != nil && in.ID != id {
		return nil, errors.New("simcloud: " + what + ": GET " + path + ": the cloud answered with instance " + quote(in.ID))
	}
	return in, err
}

// instanceByName finds the instance named name. It returns (nil, nil) only
// when the cloud answered with an empty list.
func (p *Provider) instanceByName(ctx context.Context, name string) (*instance, error) {
	what := "looking up the instance named " + quote(name)
	if name == "" {
		return nil, errors.New("simcloud: " + what + ": the node has neither a name nor a provider ID")
	}
	var list instanceList
	if _, err := p.api.Do(ctx, &rest.Request{What: what, Method: "GET", Path: "/v1/instances", Query: []rest.Param{{Name: "name", Value: name}}, Into: &list}); err != nil {
		return nil, err
	}
	// A missing or null body decodes to a nil slice; only the documented
	// empty array proves that there is no such instance.
	if list == nil {
		return nil, errors.New("simcloud: " + what + ": GET /v1/instances?name=" + rest.PathEscape(name) + ": the cloud answered 200 without a list")
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i], nil
		}
	}
	if len(list) > 0 {
		return nil, errors.New("simcloud: " + what + ": GET /v1/instances?name=" + rest.PathEscape(name) + ": the cloud answered with instances of other names")
	}
	return nil, nil
}

// nodeInstance finds a node's instance by provider ID when it has one, else
// by name, in the snapshot and else in the cloud. It returns (nil, nil)
// only on the cloud's definitive "does not exist".
func (p *Provider) nodeInstance(ctx context.Context, node *abi.Node) (*instance, error) {
	if node.ProviderID != "" {
		id, err := ParseProviderID(node.ProviderID)
		if err != nil {
			return nil, errors.New(err.Error() + " (node " + quote(node.Name) + ")")
		}
		in, err := cachedInstance(p.instances.ByID(ctx, id, p.instanceMaxAge))
		if errors.Is(err, cache.ErrNotListed) {
			return p.instanceByID(ctx, id)
		}
		return in, err
	}
	if node.Name == "" {
		return p.instanceByName(ctx, node.Name) // which explains the error
	}
	in, err := cachedInstance(p.instances.ByName(ctx, node.Name, p.instanceMaxAge))
	if errors.Is(err, cache.ErrNotListed) {
		return p.instanceByName(ctx, node.Name)
	}
	return in, err
}

func describeNode(node *abi.Node) string {
	if node.ProviderID != "" {
		return "node " + quote(node.Name) + " (" + node.ProviderID + ")"
	}
	return "node " + quote(node.Name)
}

// InstanceExists reports whether the node's instance exists. It answers
// false only when the cloud said so: a 404 for the instance ID, or an
// empty list for the node name. Every other failure is an error, because
// false makes Kubernetes delete the Node.
func (p *Provider) InstanceExists(ctx context.Context, node *abi.Node) (bool, error) {
	in, err := p.nodeInstance(ctx, node)
	if err != nil {
		return false, err
	}
	if in == nil {
		p.logf(abi.LogInfo, "the instance of "+describeNode(node)+" does not exist")
		return false, nil
	}
	return true, nil
}

// InstanceShutdown reports whether the node's instance is stopped.
func (p *Provider) InstanceShutdown(ctx context.Context, node *abi.Node) (bool, error) {
	in, err := p.nodeInstance(ctx, node)
	if err != nil {
		return false, err
	}
	if in == nil {
		return false, errNotFound("the instance of " + describeNode(node) + " does not exist")
	}
	return in.State == "stopped", nil
}

// InstanceMetadata describes the node's instance.
func (p *Provider) InstanceMetadata(ctx context.Context, node *abi.Node) (*abi.InstanceMetadata, error) {
	in, err := p.nodeInstance(ctx, node)
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, errNotFound("the instance of " + describeNode(node) + " does not exist")
	}
	meta := &abi.InstanceMetadata{
		ProviderID:       in.ProviderID(),
		InstanceType:     in.Type,
		Zone:             in.Zone,
		Region:           in.Region,
		AdditionalLabels: in.Labels,
	}
	if len(in.Addresses) > 0 {
		meta.NodeAddresses = make([]abi.NodeAddress, len(in.Addresses))
		for i, a := range in.Addresses {
			meta.NodeAddresses[i] = abi.NodeAddress{Type: a.Type, Address: a.Address}
		}
	}
	return meta, nil
}

// ---- zones ----

// GetZone would be the zone of the machine the CCM runs on, which has no
// meaning for a CCM running outside the cloud's instances.
func (p *Provider) GetZone(context.Context) (abi.Zone, error) {
	return abi.Zone{}, sdk.ErrNotImplemented
}

// GetZoneByProviderID returns the zone of the instance with the provider ID.
func (p *Provider) GetZoneByProviderID(ctx context.Context, providerID string) (abi.Zone, error) {
	id, err := ParseProviderID(providerID)
	if err != nil {
		return abi.Zone{}, err
	}
	in, err := p.instanceByID(ctx, id)
	if err != nil {
		return abi.Zone{}, err
	}
	if in == nil {
		return abi.Zone{}, errNotFound("instance " + id + " does not exist")
	}
	return abi.Zone{FailureDomain: in.Zone, Region: in.Region}, nil
}

// GetZoneByNodeName returns the zone of the instance named like the node.
func (p *Provider) GetZoneByNodeName(ctx context.Context, nodeName string) (abi.Zone, error) {
	in, err := p.instanceByName(ctx, nodeName)
	if err != nil {
		return abi.Zone{}, err
	}
	if in == nil {
		return abi.Zone{}, errNotFound("no instance is named " + quote(nodeName))
	}
	return abi.Zone{FailureDomain: in.Zone, Region: in.Region}, nil
}
