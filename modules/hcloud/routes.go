package hcloud

import (
	"context"
	"errors"
	"net/netip"
	"strconv"

	"github.com/wasmccm/wasmccm/abi"
)

// Routes live in the configured private network: a route sends a Node's
// pod CIDR to the Node's server's address in that network, as the
// official CCM does.

// routesNetworkID is the configured network's ID, resolved once for all
// instances: it costs no request after the first.
func (p *Provider) routesNetworkID(ctx context.Context, what string) (int64, error) {
	if p.cfg.Network == "" {
		return 0, errors.New("hcloud: " + what + ": routes need a network in the provider config")
	}
	return p.network(ctx)
}

// routesNetwork reads the configured network, with its routes.
func (p *Provider) routesNetwork(ctx context.Context, what string) (*network, string, error) {
	id, err := p.routesNetworkID(ctx, what)
	if err != nil {
		return nil, "", err
	}
	path := "/networks/" + strconv.FormatInt(id, 10)
	n, found, err := getByID[network](ctx, p, what+": getting network "+strconv.FormatInt(id, 10), "networks", "network", id)
	if err == nil && !found {
		err = errors.New("hcloud: " + what + ": network " + strconv.FormatInt(id, 10) + " does not exist")
	}
	return n, path, err
}

// ListRoutes implements sdk.Routes: every route of the network, named
// "<gateway>-<destination>", targeting the server whose private address is
// the gateway, or blackholed when no server has it.
//
// Gateways come from a snapshot up to routeTargetMaxAge old, not
// serverCacheMaxAge: the route controller asks every 10 s, and a listing
// of every server that often is most of a large project's API budget. An
// older snapshot cannot cause harm: a gateway it lacks is looked up again
// in a fresh listing before its route is called blackhole, and a route it
// still names after a Node whose server is gone is removed by the route
// controller once the Node object goes.
func (p *Provider) ListRoutes(ctx context.Context, _ string) ([]abi.Route, error) {
	n, _, err := p.routesNetwork(ctx, "listing routes")
	if err != nil {
		return nil, err
	}
	byIP, err := p.gateways(ctx, routeTargetMaxAge)
	if err != nil {
		return nil, err
	}
	for _, r := range n.Routes {
		if _, ok := byIP[r.Gateway]; !ok && p.serverMaxAge != 0 {
			// Blackholed routes get deleted: say so only from a listing
			// made for this question, not from one that predates the
			// gateway's server.
			p.servers.Invalidate()
			if byIP, err = p.gateways(ctx, p.serverMaxAge); err != nil {
				return nil, err
			}
			break
		}
	}
	out := make([]abi.Route, 0, len(n.Routes))
	for _, r := range n.Routes {
		rt := abi.Route{Name: r.Gateway + "-" + r.Destination, DestinationCIDR: r.Destination}
		if node, ok := byIP[r.Gateway]; ok {
			rt.TargetNode = node
		} else {
			rt.Blackhole = true
		}
		out = append(out, rt)
	}
	return out, nil
}

// CreateRoute implements sdk.Routes. The gateway is the private address of
// the server named like the target Node, and must be one of the Node's
// InternalIP addresses. A route to the same destination through another
// gateway is replaced.
func (p *Provider) CreateRoute(ctx context.Context, _ string, _ string, route *abi.Route) error {
	ctx = p.bounded(ctx)
	what := "creating route " + route.DestinationCIDR + " to node " + strconv.Quote(route.TargetNode)
	dest, err := netip.ParsePrefix(route.DestinationCIDR)
	if err != nil {
		return errors.New("hcloud: " + what + ": " + err.Error())
	}
	if !dest.Addr().Is4() {
		return errors.New("hcloud: " + what + ": private networks do not support IPv6 routes")
	}
	// Everything that can refuse the route is checked before the network
	// is read: the route controller retries a refused route at every
	// reconcile (a Node's InternalIP appears only once it is initialized),
	// and each retry should cost the API nothing.
	networkID, err := p.routesNetworkID(ctx, what)
	if err != nil {
		return err
	}
	s, err := p.serverByName(ctx, route.TargetNode, routeTargetMaxAge)
	if err != nil {
		return err
	}
	if s == nil {
		return errors.New("hcloud: " + what + ": no server is named like the node")
	}
	gateway := ""
	for _, pn := range s.PrivateNet {
		if pn.Network == networkID {
			gateway = pn.IP
		}
	}
	if gateway == "" {
		return errors.New("hcloud: " + what + ": server " + strconv.FormatInt(s.ID, 10) + " is not attached to network " + strconv.FormatInt(networkID, 10))
	}
	listed := false
	for _, a := range route.TargetNodeAddresses {
		listed = listed || (a.Type == "InternalIP" && a.Address == gateway)
	}
	if !listed {
		return errors.New("hcloud: " + what + ": the server's private address " + gateway + " is not an InternalIP of the node")
	}
	n, path, err := p.routesNetwork(ctx, what)
	if err != nil {
		return err
	}
	destination := dest.Masked().String()
	for _, r := range n.Routes {
		if r.Destination != destination {
			continue
		}
		if r.Gateway == gateway {
			return nil
		}
		if err := p.post(ctx, what+": replacing the route via "+r.Gateway, path+"/actions/delete_route", r); err != nil {
			return err
		}
	}
	return p.post(ctx, what, path+"/actions/add_route", networkRoute{Destination: destination, Gateway: gateway})
}

// DeleteRoute implements sdk.Routes. A route that is already gone is
// deleted.
func (p *Provider) DeleteRoute(ctx context.Context, _ string, route *abi.Route) error {
	ctx = p.bounded(ctx)
	what := "deleting route " + route.DestinationCIDR
	n, path, err := p.routesNetwork(ctx, what)
	if err != nil {
		return err
	}
	for _, r := range n.Routes {
		if r.Destination == route.DestinationCIDR {
			return p.post(ctx, what, path+"/actions/delete_route", r)
		}
	}
	return nil
}
