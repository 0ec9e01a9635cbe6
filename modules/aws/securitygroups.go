package aws

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/wasmccm/wasmccm/modules/aws/internal/xmltree"
	"github.com/wasmccm/wasmccm/modules/sdk"
)

// Security groups of load balancers, as the official CCM keeps them: each
// ELB gets a group of its own, "k8s-elb-<name>", tagged for the cluster,
// that lets the Service's source ranges reach its ports; each Node's
// instance group lets the ELB's group in (all protocols).

// dependencyDelay is how long a deletion the API refuses with
// DependencyViolation waits before it is tried again: ELB releases its
// network interfaces a little after the ELB is gone.
const dependencyDelay = 5 * time.Second

// rule is one ungrouped ingress rule: a protocol ("tcp", "icmp", "-1"), a
// port range and one source, a CIDR or a group; a CIDR's description is
// how the NLB rules are told apart.
type rule struct {
	Protocol    string
	From, To    int
	CIDR, Group string
	Description string
}

type securityGroup struct {
	ID      string
	Tags    map[string]string
	Ingress []rule
}

func elbGroupName(lbName string) string { return "k8s-elb-" + lbName }

// describeGroups lists the groups params select, their rules ungrouped.
func (p *Provider) describeGroups(ctx context.Context, what string, params url.Values) ([]securityGroup, error) {
	var out []securityGroup
	err := p.ec2.each(ctx, what, "DescribeSecurityGroups", params, func(page *xmltree.Element) {
		for _, g := range page.Items("securityGroupInfo") {
			sg := securityGroup{ID: g.TextOf("groupId"), Tags: tagsOf(g)}
			for _, perm := range g.Items("ipPermissions") {
				base := rule{Protocol: perm.TextOf("ipProtocol")}
				base.From, _ = strconv.Atoi(perm.TextOf("fromPort"))
				base.To, _ = strconv.Atoi(perm.TextOf("toPort"))
				for _, r := range perm.Items("ipRanges") {
					one := base
					one.CIDR, one.Description = r.TextOf("cidrIp"), r.TextOf("description")
					sg.Ingress = append(sg.Ingress, one)
				}
				for _, src := range perm.Items("groups") {
					one := base
					one.Group = src.TextOf("groupId")
					sg.Ingress = append(sg.Ingress, one)
				}
			}
			out = append(out, sg)
		}
	})
	return out, err
}

// elbSecurityGroups returns the groups the ELB gets: the annotated ones,
// else the configured one, else its own group, made if missing, with its
// rules brought to the spec; then the annotated extra groups.
func (p *Provider) elbSecurityGroups(ctx context.Context, vpc string, spec *lbSpec) ([]string, error) {
	groups := spec.groups
	if len(groups) == 0 && p.cfg.ELBSecurityGroup != "" {
		groups = []string{p.cfg.ELBSecurityGroup}
	}
	if len(groups) == 0 {
		own, err := p.ensureGroup(ctx, vpc, spec)
		if err != nil {
			return nil, err
		}
		var want []rule
		for _, cidr := range spec.sourceRanges {
			for _, l := range spec.listeners {
				want = append(want, rule{Protocol: "tcp", From: l.Port, To: l.Port, CIDR: cidr})
			}
			// ICMP "fragmentation needed", for path MTU discovery.
			want = append(want, rule{Protocol: "icmp", From: 3, To: 4, CIDR: cidr})
		}
		if err := p.setIngress(ctx, own, want); err != nil {
			return nil, err
		}
		groups = []string{own.ID}
	}
	return append(append([]string(nil), groups...), spec.extraGroups...), nil
}

// ensureGroup finds the ELB's own group by name in the VPC, or makes it.
// A found group without the cluster tag gets it (a create that failed
// before tagging), unless it is another cluster's.
func (p *Provider) ensureGroup(ctx context.Context, vpc string, spec *lbSpec) (*securityGroup, error) {
	name := elbGroupName(spec.name)
	what := "security group " + name
	for attempt := 0; ; attempt++ {
		found, err := p.describeGroups(ctx, "finding "+what, filters(url.Values{}, "group-name", name, "vpc-id", vpc))
		if err != nil {
			return nil, err
		}
		if len(found) > 0 {
			sg := &found[0]
			if _, ok := sg.Tags[p.clusterTag]; !ok {
				if !p.mayUse(sg.Tags) {
					return nil, errors.New("aws: " + what + " (" + sg.ID + ") is tagged for another cluster")
				}
				if err := p.ec2.do(ctx, "tagging "+what, "CreateTags", url.Values{"ResourceId.1": {sg.ID},
					"Tag.1.Key": {p.clusterTag}, "Tag.1.Value": {"owned"}}); err != nil {
					return nil, err
				}
			}
			return sg, nil
		}
		params := url.Values{"GroupName": {name}, "VpcId": {vpc},
			"GroupDescription":                {"Security group for Kubernetes ELB " + spec.name + " (" + spec.service + ")"},
			"TagSpecification.1.ResourceType": {"security-group"}}
		tags := map[string]string{p.clusterTag: "owned"}
		for k, v := range spec.tags {
			tags[k] = v
		}
		setTags(params, "TagSpecification.1.Tag", tags)
		root, err := p.ec2.call(ctx, "creating "+what, "CreateSecurityGroup", params)
		var e *apiError
		if errors.As(err, &e) && e.code == "InvalidGroup.Duplicate" && attempt == 0 {
			continue // made concurrently: find it
		}
		if err != nil {
			return nil, err
		}
		id := root.TextOf("groupId")
		if id == "" {
			return nil, errors.New("aws: creating " + what + ": the answer names no group")
		}
		return &securityGroup{ID: id, Tags: tags}, nil
	}
}

// setIngress brings the group's ingress rules to want.
func (p *Provider) setIngress(ctx context.Context, sg *securityGroup, want []rule) error {
	var add, remove []rule
	for _, r := range want {
		if !slices.Contains(sg.Ingress, r) && !slices.Contains(add, r) {
			add = append(add, r)
		}
	}
	for _, r := range sg.Ingress {
		if !slices.Contains(want, r) {
			remove = append(remove, r)
		}
	}
	if err := p.changeIngress(ctx, "AuthorizeSecurityGroupIngress", sg.ID, add); err != nil {
		return err
	}
	return p.changeIngress(ctx, "RevokeSecurityGroupIngress", sg.ID, remove)
}

// changeIngress authorizes or revokes rules on a group. A rule already
// there (authorizing) or already gone (revoking) is what was asked for.
func (p *Provider) changeIngress(ctx context.Context, action, group string, rules []rule) error {
	if len(rules) == 0 {
		return nil
	}
	params := url.Values{"GroupId": {group}}
	for i, r := range rules {
		prefix := "IpPermissions." + strconv.Itoa(i+1) + "."
		params.Set(prefix+"IpProtocol", r.Protocol)
		if r.Protocol != "-1" {
			params.Set(prefix+"FromPort", strconv.Itoa(r.From))
			params.Set(prefix+"ToPort", strconv.Itoa(r.To))
		}
		if r.CIDR != "" {
			params.Set(prefix+"IpRanges.1.CidrIp", r.CIDR)
			if r.Description != "" {
				params.Set(prefix+"IpRanges.1.Description", r.Description)
			}
		} else {
			params.Set(prefix+"Groups.1.GroupId", r.Group)
		}
	}
	err := p.ec2.do(ctx, "changing the ingress of security group "+group, action, params)
	var e *apiError
	if errors.As(err, &e) && (e.code == "InvalidPermission.Duplicate" || e.code == "InvalidPermission.NotFound") {
		return nil
	}
	return err
}

// syncInstanceGroups lets the ELB's group into each instance's group
// (the one tagged for the cluster, or its only group) and takes it out of
// the cluster's groups no instance needs; when deleting, out of every
// group, so that the ELB's group can be deleted.
func (p *Provider) syncInstanceGroups(ctx context.Context, lb *loadBalancer, instances []instance, deleting bool) error {
	if len(lb.SecurityGroups) == 0 {
		return errors.New("aws: load balancer " + lb.Name + " has no security group to let into the Nodes")
	}
	clusterGroups, err := p.describeGroups(ctx, "listing the cluster's security groups", filters(url.Values{}, "tag-key", p.clusterTag))
	if err != nil {
		return err
	}
	tagged := map[string]bool{}
	for _, g := range clusterGroups {
		tagged[g.ID] = true
	}
	source := lb.SecurityGroups[0]
	for _, g := range lb.SecurityGroups {
		if tagged[g] {
			source = g
			break
		}
	}
	want, err := p.instanceGroups(instances, tagged)
	if err != nil {
		return err
	}
	letIn := rule{Protocol: "-1", Group: source}
	referencing, err := p.describeGroups(ctx, "finding the groups load balancer "+lb.Name+" reaches", filters(url.Values{}, "ip-permission.group-id", source))
	if err != nil {
		return err
	}
	for _, g := range referencing {
		switch {
		case want[g.ID]:
			delete(want, g.ID)
		case tagged[g.ID] || deleting:
			if err := p.changeIngress(ctx, "RevokeSecurityGroupIngress", g.ID, []rule{letIn}); err != nil {
				return err
			}
		}
	}
	for _, g := range slices.Sorted(maps.Keys(want)) {
		if err := p.changeIngress(ctx, "AuthorizeSecurityGroupIngress", g, []rule{letIn}); err != nil {
			return err
		}
	}
	return nil
}

// instanceGroups are the groups load balancers reach the instances
// through, as the official CCM picks them: each instance's group tagged
// for the cluster, or its only group.
func (p *Provider) instanceGroups(instances []instance, tagged map[string]bool) (map[string]bool, error) {
	want := map[string]bool{}
	for _, in := range instances {
		var ours, others []string
		for _, g := range in.SecurityGroups {
			if tagged[g] {
				ours = append(ours, g)
			} else {
				others = append(others, g)
			}
		}
		switch {
		case len(ours) == 1:
			want[ours[0]] = true
		case len(ours) > 1:
			return nil, errors.New("aws: instance " + in.ID + " has several security groups tagged " + p.clusterTag + "; tag only the Nodes' group")
		case len(others) == 1:
			want[others[0]] = true
		case len(others) > 1:
			return nil, errors.New("aws: instance " + in.ID + " has several security groups and none tagged " + p.clusterTag + "; tag the Nodes' group")
		}
	}
	return want, nil
}

// revokeReferences revokes every rule of another group that lets group
// in, so that group can be deleted.
func (p *Provider) revokeReferences(ctx context.Context, group string) error {
	referencing, err := p.describeGroups(ctx, "finding the rules that let "+group+" in", filters(url.Values{}, "ip-permission.group-id", group))
	if err != nil {
		return err
	}
	for _, g := range referencing {
		var rules []rule
		for _, r := range g.Ingress {
			if r.Group == group && g.ID != group {
				rules = append(rules, r)
			}
		}
		if err := p.changeIngress(ctx, "RevokeSecurityGroupIngress", g.ID, rules); err != nil {
			return err
		}
	}
	return nil
}

// groupsNamed returns the cluster's groups of that name.
func (p *Provider) groupsNamed(ctx context.Context, name string) ([]string, error) {
	found, err := p.describeGroups(ctx, "finding security group "+name, filters(url.Values{}, "group-name", name, "tag-key", p.clusterTag))
	var ids []string
	for _, g := range found {
		ids = append(ids, g.ID)
	}
	return ids, err
}

// deleteGroup deletes a group; one already gone is deleted, one still in
// use is tried again after dependencyDelay.
func (p *Provider) deleteGroup(ctx context.Context, id string) error {
	err := p.ec2.do(ctx, "deleting security group "+id, "DeleteSecurityGroup", url.Values{"GroupId": {id}})
	var e *apiError
	switch {
	case absent(err):
		return nil
	case errors.As(err, &e) && e.code == "DependencyViolation":
		return sdk.RetryAfter(dependencyDelay, err.Error()+" (still in use; deleted when released)")
	}
	return err
}
