package aws

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/aws/internal/xmltree"
)

// ServiceUIDTag is the ELB tag holding the UID of the Service it was made
// for. The official CCM records only the Service's name
// (kubernetes.io/service-name), and an ELB's name keeps 31 of the UID's 32
// hex digits, so without this tag the host could not tell an ELB whose
// Service is gone from one whose Service was recreated under the same
// name. ELBs the official CCM made do not carry it and are never listed.
const ServiceUIDTag = "wasmccm.io/service-uid"

// tagsPerRequest is how many load balancers one DescribeTags may name.
const tagsPerRequest = 20

// ListLoadBalancers implements sdk.LoadBalancerLister: the ELBs tagged
// with this cluster's tag and a Service UID whose name is the one that UID
// gives. Every page of DescribeLoadBalancers and every DescribeTags must
// succeed, or the listing fails: a short list would read as load
// balancers gone.
func (p *Provider) ListLoadBalancers(ctx context.Context, _ string) ([]abi.OwnedLoadBalancer, error) {
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
			uid, name := tags[ServiceUIDTag], d.TextOf("LoadBalancerName")
			if _, ours := tags[p.clusterTag]; !ours || uid == "" || name != p.GetLoadBalancerName(ctx, "", &abi.Service{UID: uid}) {
				continue
			}
			namespace, service, _ := strings.Cut(tags[serviceNameTag], "/")
			out = append(out, abi.OwnedLoadBalancer{Name: name, ID: name, ServiceUID: uid, ServiceNamespace: namespace, ServiceName: service})
		}
		if described != len(batch) {
			return nil, errors.New("aws: reading the load balancers' tags: asked for " + strconv.Itoa(len(batch)) + ", the answer describes " + strconv.Itoa(described))
		}
	}
	return out, nil
}
