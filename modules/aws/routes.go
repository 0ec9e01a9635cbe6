package aws

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/aws/internal/xmltree"
)

// Routes live in the one route table tagged with the cluster tag, as the
// official CCM keeps them: a route per Node's pod CIDR, to its instance.

type route struct {
	DestinationCIDR, InstanceID, State string
}

type routeTable struct {
	ID     string
	Routes []route
}

// routeTable finds the cluster's route table; none or several is an
// error, never an empty table.
func (p *Provider) routeTable(ctx context.Context) (*routeTable, error) {
	var tables []routeTable
	params := filters(url.Values{}, "tag-key", p.clusterTag)
	err := p.ec2.each(ctx, "finding the cluster's route table", "DescribeRouteTables", params, func(page *xmltree.Element) {
		for _, t := range page.Items("routeTableSet") {
			table := routeTable{ID: t.TextOf("routeTableId")}
			for _, r := range t.Items("routeSet") {
				table.Routes = append(table.Routes, route{DestinationCIDR: r.TextOf("destinationCidrBlock"),
					InstanceID: r.TextOf("instanceId"), State: r.TextOf("state")})
			}
			tables = append(tables, table)
		}
	})
	if err != nil {
		return nil, err
	}
	if len(tables) != 1 {
		return nil, errors.New("aws: found " + strconv.Itoa(len(tables)) + " route tables tagged " + p.clusterTag + "; routes need exactly one")
	}
	return &tables[0], nil
}

// ListRoutes lists the table's blackhole routes and its routes to
// instances, each instance named by its Node name (its private DNS name).
// A failed lookup of the instances fails the listing: a route missing from
// the answer would be created again.
func (p *Provider) ListRoutes(ctx context.Context, clusterName string) ([]abi.Route, error) {
	table, err := p.routeTable(ctx)
	if err != nil {
		return nil, err
	}
	names, err := p.instanceNames(ctx, table.Routes)
	if err != nil {
		return nil, err
	}
	var routes []abi.Route
	for _, r := range table.Routes {
		name := clusterName + "-" + r.DestinationCIDR
		switch {
		case r.DestinationCIDR == "":
		case r.State == "blackhole":
			routes = append(routes, abi.Route{Name: name, DestinationCIDR: r.DestinationCIDR, Blackhole: true})
		case r.InstanceID != "" && names[r.InstanceID] != "":
			routes = append(routes, abi.Route{Name: name, TargetNode: names[r.InstanceID], DestinationCIDR: r.DestinationCIDR})
		case r.InstanceID != "":
			return nil, errors.New("aws: route " + r.DestinationCIDR + " targets instance " + r.InstanceID + ", which the API did not describe")
		}
	}
	return routes, nil
}

// instanceNamesMaxAge is how long an instance's private DNS name is kept
// in the module's shared state. The name is fixed for the instance's life,
// so ListRoutes, which the route controller calls every few seconds, asks
// the API only about instances it has not seen within the hour (the
// official CCM serves it from a 10-second snapshot of every instance).
const instanceNamesMaxAge = time.Hour

// instanceNames returns the private DNS names of the routes' instances
// (blackhole routes aside): the known ones from shared state, the others
// from one DescribeInstances.
func (p *Provider) instanceNames(ctx context.Context, routes []route) (map[string]string, error) {
	names := map[string]string{}
	var missing []string
	for _, r := range routes {
		if r.InstanceID == "" || r.State == "blackhole" || names[r.InstanceID] != "" {
			continue
		}
		if name, ok := p.host.StateGet("aws/instance-name/"+r.InstanceID, instanceNamesMaxAge, false); ok {
			names[r.InstanceID] = string(name)
		} else {
			missing = append(missing, r.InstanceID)
		}
	}
	if len(missing) == 0 {
		return names, nil
	}
	list, err := p.describeInstances(ctx, "naming the routes' instances", list(url.Values{}, "InstanceId", missing))
	if err != nil {
		return nil, err
	}
	for _, in := range list {
		if in.PrivateDNSName != "" && in.State != "terminated" {
			names[in.ID] = in.PrivateDNSName
			_ = p.host.StateSet("aws/instance-name/"+in.ID, []byte(in.PrivateDNSName)) // a full store only costs a request
		}
	}
	return names, nil
}

// CreateRoute routes the CIDR to the target Node's instance, turning off
// the instance's source/destination check (a Node forwarding pod traffic
// needs it off) and replacing a blackhole route for the same CIDR.
func (p *Provider) CreateRoute(ctx context.Context, _ string, _ string, r *abi.Route) error {
	in, err := p.nodeInstance(ctx, &abi.Node{Name: r.TargetNode})
	if err != nil {
		return err
	}
	if in == nil {
		return errors.New("aws: no instance for Node " + r.TargetNode + " to route " + r.DestinationCIDR + " to")
	}
	if in.SourceDestCheck {
		if err := p.ec2.do(ctx, "turning off the source/destination check of "+in.ID, "ModifyInstanceAttribute",
			url.Values{"InstanceId": {in.ID}, "SourceDestCheck.Value": {"false"}}); err != nil {
			return err
		}
	}
	table, err := p.routeTable(ctx)
	if err != nil {
		return err
	}
	for _, existing := range table.Routes {
		if existing.DestinationCIDR != r.DestinationCIDR {
			continue
		}
		if existing.InstanceID == in.ID && existing.State != "blackhole" {
			return nil
		}
		if existing.State != "blackhole" {
			return errors.New("aws: route table " + table.ID + " already routes " + r.DestinationCIDR + " to " + existing.InstanceID)
		}
		if err := p.deleteRoute(ctx, table.ID, r.DestinationCIDR); err != nil {
			return err
		}
	}
	return p.ec2.do(ctx, "routing "+r.DestinationCIDR+" to "+in.ID, "CreateRoute",
		url.Values{"RouteTableId": {table.ID}, "DestinationCidrBlock": {r.DestinationCIDR}, "InstanceId": {in.ID}})
}

// DeleteRoute removes the route; one the API reports absent is deleted.
func (p *Provider) DeleteRoute(ctx context.Context, _ string, r *abi.Route) error {
	table, err := p.routeTable(ctx)
	if err != nil {
		return err
	}
	return p.deleteRoute(ctx, table.ID, r.DestinationCIDR)
}

func (p *Provider) deleteRoute(ctx context.Context, tableID, cidr string) error {
	err := p.ec2.do(ctx, "deleting the route for "+cidr, "DeleteRoute",
		url.Values{"RouteTableId": {tableID}, "DestinationCidrBlock": {cidr}})
	if absent(err) {
		return nil
	}
	return err
}
