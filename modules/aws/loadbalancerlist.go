package aws

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/aws/internal/xmltree"
)

// ServiceUIDTag is the tag of a load balancer (Classic or NLB) and of an
// NLB's target groups holding the UID of the Service it was made for. The
// official CCM records only the Service's name
// (kubernetes.io/service-name), and a load balancer's name keeps 31 of the
// UID's 32 hex digits, so without this tag the host could not tell one
// whose Service is gone from one whose Service was recreated under the
// same name. What the official CCM made does not carry it and is never
// listed.
const ServiceUIDTag = "wasmccm.io/service-uid"

// tagsPerRequest is how many load balancers one DescribeTags may name
// (ELBv2's: how many resources).
const tagsPerRequest = 20

// ListLoadBalancers implements sdk.LoadBalancerLister: the Classic ELBs
// and the NLBs tagged with this cluster's tag and a Service UID whose
// name is the one that UID gives, and, under the name that UID gives, the
// cluster's target groups tagged with a UID no listed load balancer has
// (made by an Ensure or left by a deletion that failed half-way), so that
// the sweep's deletion, which removes them and the NLB rules, reaches
// them. Every page and every tag read must succeed, or the listing fails:
// a short list would read as load balancers gone.
func (p *Provider) ListLoadBalancers(ctx context.Context, _ string) ([]abi.OwnedLoadBalancer, error) {
	out, err := p.listClassic(ctx)
	if err != nil {
		return nil, err
	}
	nlbs, err := p.listNLBs(ctx)
	if err != nil {
		return nil, err
	}
	out = append(out, nlbs...)
	groups, err := p.ownedTargetGroups(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		name := p.GetLoadBalancerName(ctx, "", &abi.Service{UID: g.UID})
		if slices.ContainsFunc(out, func(lb abi.OwnedLoadBalancer) bool { return lb.Name == name }) {
			continue
		}
		namespace, service, _ := strings.Cut(g.Service, "/")
		out = append(out, abi.OwnedLoadBalancer{Name: name, ID: g.ARN, ServiceUID: g.UID, ServiceNamespace: namespace, ServiceName: service})
	}
	return out, nil
}

// owned makes the listing's entry of a load balancer with these tags, ok
// when it is this cluster's, carries a UID, and is named as the UID names
// it.
func (p *Provider) owned(name, id string, tags map[string]string) (abi.OwnedLoadBalancer, bool) {
	uid := tags[ServiceUIDTag]
	if _, ours := tags[p.clusterTag]; !ours || uid == "" || name != p.GetLoadBalancerName(context.Background(), "", &abi.Service{UID: uid}) {
		return abi.OwnedLoadBalancer{}, false
	}
	namespace, service, _ := strings.Cut(tags[serviceNameTag], "/")
	return abi.OwnedLoadBalancer{Name: name, ID: id, ServiceUID: uid, ServiceNamespace: namespace, ServiceName: service}, true
}

// listNLBs lists the cluster's NLBs: every page of ELBv2's
// DescribeLoadBalancers, then their tags 20 at a time.
func (p *Provider) listNLBs(ctx context.Context) ([]abi.OwnedLoadBalancer, error) {
	names := map[string]string{} // ARN → name
	var arns []string
	err := p.elbv2.each(ctx, "listing the network load balancers", "DescribeLoadBalancers", url.Values{}, func(page *xmltree.Element) {
		for _, d := range page.Child("DescribeLoadBalancersResult").Items("LoadBalancers") {
			arn := d.TextOf("LoadBalancerArn")
			names[arn] = d.TextOf("LoadBalancerName")
			arns = append(arns, arn)
		}
	})
	if err != nil {
		return nil, err
	}
	var out []abi.OwnedLoadBalancer
	err = p.eachTagged(ctx, "reading the network load balancers' tags", arns, func(arn string, tags map[string]string) {
		if lb, ok := p.owned(names[arn], arn, tags); ok {
			out = append(out, lb)
		}
	})
	return out, err
}

// listClassic lists the cluster's Classic ELBs: every page of
// DescribeLoadBalancers, then their tags 20 at a time.
func (p *Provider) listClassic(ctx context.Context) ([]abi.OwnedLoadBalancer, error) {
	var names []string
	err := p.elb.each(ctx, "listing the load balancers", "DescribeLoadBalancers", url.Values{}, func(page *xmltree.Element) {
		for _, d := range page.Child("DescribeLoadBalancersResult").Items("LoadBalancerDescriptions") {
			names = append(names, d.TextOf("LoadBalancerName"))
		}
	})
	if err != nil {
		return nil, err
	}
	var out []abi.OwnedLoadBalancer
	for start := 0; start < len(names); start += tagsPerRequest {
		batch := names[start:min(start+tagsPerRequest, len(names))]
		result, err := p.elb.result(ctx, "reading the load balancers' tags", "DescribeTags", list(url.Values{}, "LoadBalancerNames.member", batch))
		if err != nil {
			return nil, err
		}
		described := 0
		for _, d := range result.Items("TagDescriptions") {
			described++
			tags := map[string]string{}
			for _, t := range d.Items("Tags") {
				tags[t.TextOf("Key")] = t.TextOf("Value")
			}
			name := d.TextOf("LoadBalancerName")
			if lb, ok := p.owned(name, name, tags); ok {
				out = append(out, lb)
			}
		}
		if described != len(batch) {
			return nil, errors.New("aws: reading the load balancers' tags: asked for " + strconv.Itoa(len(batch)) + ", the answer describes " + strconv.Itoa(described))
		}
	}
	return out, nil
}
