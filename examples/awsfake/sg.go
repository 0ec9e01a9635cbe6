package awsfake

import (
	"cmp"
	"encoding/xml"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Security groups.

type (
	xmlPermission struct {
		IPProtocol string `xml:"ipProtocol"`
		FromPort   *int   `xml:"fromPort,omitempty"`
		ToPort     *int   `xml:"toPort,omitempty"`
		Groups     []struct {
			UserID  string `xml:"userId"`
			GroupID string `xml:"groupId"`
		} `xml:"groups>item"`
		IPRanges []xmlIPRange `xml:"ipRanges>item"`
	}
	xmlSecurityGroup struct {
		OwnerID     string          `xml:"ownerId"`
		GroupID     string          `xml:"groupId"`
		GroupName   string          `xml:"groupName"`
		Description string          `xml:"groupDescription"`
		VpcID       string          `xml:"vpcId"`
		Ingress     []xmlPermission `xml:"ipPermissions>item"`
		Egress      []xmlPermission `xml:"ipPermissionsEgress>item"`
		Tags        []xmlTag        `xml:"tagSet>item"`
	}
)

type xmlIPRange struct {
	CidrIP      string `xml:"cidrIp"`
	Description string `xml:"description,omitempty"`
}

func permissionsXML(ps []Permission) []xmlPermission {
	var out []xmlPermission
	for _, p := range ps {
		x := xmlPermission{IPProtocol: p.Protocol}
		if p.Protocol != "-1" {
			from, to := p.FromPort, p.ToPort
			x.FromPort, x.ToPort = &from, &to
		}
		for _, g := range p.GroupIDs {
			x.Groups = append(x.Groups, struct {
				UserID  string `xml:"userId"`
				GroupID string `xml:"groupId"`
			}{AccountID, g})
		}
		for _, c := range p.CIDRs {
			x.IPRanges = append(x.IPRanges, xmlIPRange{c, p.Description})
		}
		out = append(out, x)
	}
	return out
}

func (cl *call) describeSecurityGroups() (any, *apiError) {
	c := cl.c
	ids := cl.list("GroupId")
	names := cl.list("GroupName")
	for _, id := range ids {
		if !validID(id, "sg") {
			return nil, badRequest("InvalidGroupId.Malformed", "Invalid id: \"%s\" (expecting \"sg-...\")", id)
		}
		if c.securityGroups[id] == nil {
			return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(sortedKeys(c.securityGroups), func(id string) bool {
			return c.securityGroups[id].Name == n && c.securityGroups[id].VpcID == c.defaultVpc().ID
		}) {
			return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", n, c.defaultVpc().ID)
		}
	}
	filters := cl.filters()
	var list []xmlSecurityGroup
	for _, id := range sortedKeys(c.securityGroups) {
		sg := c.securityGroups[id]
		if len(ids) > 0 && !slices.Contains(ids, id) || len(names) > 0 && !slices.Contains(names, sg.Name) {
			continue
		}
		ok, err := matchFilters(filters, sg.Tags, true, func(name string) ([]string, bool) {
			switch name {
			case "group-id":
				return []string{sg.ID}, true
			case "group-name":
				return []string{sg.Name}, true
			case "vpc-id":
				return []string{sg.VpcID}, true
			case "description":
				return []string{sg.Description}, true
			case "owner-id":
				return []string{AccountID}, true
			case "ip-permission.group-id", "ip-permission.cidr", "ip-permission.protocol":
				var have []string
				for _, p := range sg.Ingress {
					switch name {
					case "ip-permission.group-id":
						have = append(have, p.GroupIDs...)
					case "ip-permission.cidr":
						have = append(have, p.CIDRs...)
					default:
						have = append(have, p.Protocol)
					}
				}
				return have, true
			}
			return nil, false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			list = append(list, xmlSecurityGroup{OwnerID: AccountID, GroupID: sg.ID, GroupName: sg.Name, Description: sg.Description,
				VpcID: sg.VpcID, Ingress: permissionsXML(sg.Ingress), Egress: permissionsXML(sg.Egress), Tags: xmlTags(sg.Tags)})
		}
	}
	maxResults, err := cl.intParam("MaxResults", 0)
	if err != nil {
		return nil, err
	}
	page, next, err := paginate(list, cmp.Or(maxResults, cl.c.opts.PageSize), cl.get("NextToken"))
	if err != nil {
		return nil, err
	}
	return struct {
		XMLName   xml.Name           `xml:"DescribeSecurityGroupsResponse"`
		NS        string             `xml:"xmlns,attr"`
		RequestID string             `xml:"requestId"`
		Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
		NextToken string             `xml:"nextToken,omitempty"`
	}{NS: ec2NS, RequestID: cl.requestID, Groups: page, NextToken: next}, nil
}

func (cl *call) createSecurityGroup() (any, *apiError) {
	c := cl.c
	name, err := cl.required("GroupName")
	if err != nil {
		return nil, err
	}
	desc, err := cl.required("GroupDescription")
	if err != nil {
		return nil, err
	}
	if len(name) > 255 || len(desc) > 255 {
		return nil, badRequest("InvalidParameterValue", "Value for parameter GroupName or GroupDescription is too long (255 characters at most)")
	}
	if strings.HasPrefix(name, "sg-") {
		return nil, badRequest("InvalidParameterValue", "Group names may not be in the format sg-*")
	}
	vpcID := cl.get("VpcId")
	if vpcID == "" {
		vpcID = c.defaultVpc().ID
	}
	if c.vpcs[vpcID] == nil {
		return nil, badRequest("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", vpcID)
	}
	for _, sg := range c.securityGroups {
		if sg.Name == name && sg.VpcID == vpcID {
			return nil, badRequest("InvalidGroup.Duplicate", "The security group '%s' already exists for VPC '%s'", name, vpcID)
		}
	}
	sg := &SecurityGroup{ID: c.id("sg"), Name: name, Description: desc, VpcID: vpcID, Tags: map[string]string{},
		Egress: []Permission{{Protocol: "-1", CIDRs: []string{"0.0.0.0/0"}}}}
	for _, p := range cl.structs("TagSpecification") {
		if t := cl.get(p + "ResourceType"); t == "" || t == "security-group" {
			for k, v := range cl.tags(p + "Tag") {
				sg.Tags[k] = v
			}
		}
	}
	c.securityGroups[sg.ID] = sg
	return struct {
		XMLName   xml.Name `xml:"CreateSecurityGroupResponse"`
		NS        string   `xml:"xmlns,attr"`
		RequestID string   `xml:"requestId"`
		Return    bool     `xml:"return"`
		GroupID   string   `xml:"groupId"`
		Tags      []xmlTag `xml:"tagSet>item"`
	}{NS: ec2NS, RequestID: cl.requestID, Return: true, GroupID: sg.ID, Tags: xmlTags(sg.Tags)}, nil
}

// targetGroup finds the group of a GroupId or GroupName (default VPC).
func (cl *call) targetGroup() (*SecurityGroup, *apiError) {
	c := cl.c
	if id := cl.get("GroupId"); id != "" {
		if !validID(id, "sg") {
			return nil, badRequest("InvalidGroupId.Malformed", "Invalid id: \"%s\" (expecting \"sg-...\")", id)
		}
		if sg := c.securityGroups[id]; sg != nil {
			return sg, nil
		}
		return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	}
	name := cl.get("GroupName")
	if name == "" {
		return nil, badRequest("MissingParameter", "The request must contain the parameter groupName or groupId")
	}
	for _, sg := range c.securityGroups {
		if sg.Name == name && sg.VpcID == c.defaultVpc().ID {
			return sg, nil
		}
	}
	return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", name, c.defaultVpc().ID)
}

// permissions reads IpPermissions.N (or the one-rule shorthand
// IpProtocol/FromPort/ToPort/CidrIp) as single-source rules, the unit in
// which EC2 compares them.
func (cl *call) permissions() ([]Permission, *apiError) {
	var out []Permission
	read := func(p string) *apiError {
		proto := strings.ToLower(cl.get(p + "IpProtocol"))
		switch proto {
		case "tcp", "udp", "icmp", "-1":
		case "6":
			proto = "tcp"
		case "17":
			proto = "udp"
		case "1":
			proto = "icmp"
		case "all":
			proto = "-1"
		default:
			return badRequest("InvalidParameterValue", "Invalid value '%s' for IP protocol. Unknown protocol.", cl.get(p+"IpProtocol"))
		}
		base := Permission{Protocol: proto}
		if proto != "-1" {
			from, err := cl.intParam(p+"FromPort", -1)
			if err != nil {
				return err
			}
			to, err := cl.intParam(p+"ToPort", -1)
			if err != nil {
				return err
			}
			if proto != "icmp" && (from < 0 || to < from || to > 65535) {
				return badRequest("InvalidParameterValue", "Invalid port range (%d-%d)", from, to)
			}
			base.FromPort, base.ToPort = from, to
		}
		var cidrs, descriptions, groups []string
		if p == "" {
			if v := cl.get("CidrIp"); v != "" {
				cidrs, descriptions = append(cidrs, v), append(descriptions, "")
			}
		} else {
			for _, r := range cl.structs(p + "IpRanges") {
				cidrs, descriptions = append(cidrs, cl.get(r+"CidrIp")), append(descriptions, cl.get(r+"Description"))
			}
			for _, g := range cl.structs(p + "Groups") {
				id := cl.get(g + "GroupId")
				if id == "" {
					if sg := cl.groupByName(cl.get(g + "GroupName")); sg != nil {
						id = sg.ID
					}
				}
				if cl.c.securityGroups[id] == nil {
					return badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
				}
				groups = append(groups, id)
			}
		}
		for i, cidr := range cidrs {
			pfx, err := netip.ParsePrefix(cidr)
			if err != nil || !pfx.Addr().Is4() {
				return badRequest("InvalidParameterValue", "CIDR block %s is malformed", cidr)
			}
			r := base
			r.CIDRs, r.Description = []string{pfx.String()}, descriptions[i]
			out = append(out, r)
		}
		for _, g := range groups {
			r := base
			r.GroupIDs = []string{g}
			out = append(out, r)
		}
		if len(cidrs)+len(groups) == 0 {
			return badRequest("MissingParameter", "The request must contain an IP range or a source security group")
		}
		return nil
	}
	ps := cl.structs("IpPermissions")
	if len(ps) == 0 {
		if cl.get("IpProtocol") == "" {
			return nil, badRequest("MissingParameter", "The request must contain the parameter ipPermissions")
		}
		return out, read("")
	}
	for _, p := range ps {
		if err := read(p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (cl *call) groupByName(name string) *SecurityGroup {
	for _, sg := range cl.c.securityGroups {
		if sg.Name == name && sg.VpcID == cl.c.defaultVpc().ID {
			return sg
		}
	}
	return nil
}

// sameRule compares two single-source rules; as EC2's, the comparison
// leaves descriptions out.
func sameRule(a, b Permission) bool {
	return a.Protocol == b.Protocol && a.FromPort == b.FromPort && a.ToPort == b.ToPort &&
		slices.Equal(a.CIDRs, b.CIDRs) && slices.Equal(a.GroupIDs, b.GroupIDs)
}

func ruleString(p Permission) string {
	src := strings.Join(append(slices.Clone(p.CIDRs), p.GroupIDs...), ",")
	return "peer: " + src + ", " + strings.ToUpper(p.Protocol) + ", from port: " + strconv.Itoa(p.FromPort) + ", to port: " + strconv.Itoa(p.ToPort) + ", ALLOW"
}

func (cl *call) authorizeIngress() (any, *apiError) {
	sg, err := cl.targetGroup()
	if err != nil {
		return nil, err
	}
	rules, err := cl.permissions()
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		if slices.ContainsFunc(sg.Ingress, func(have Permission) bool { return sameRule(have, r) }) {
			return nil, badRequest("InvalidPermission.Duplicate", "the specified rule \"%s\" already exists", ruleString(r))
		}
	}
	sg.Ingress = append(sg.Ingress, rules...)
	return cl.ok("AuthorizeSecurityGroupIngress"), nil
}

func (cl *call) revokeIngress() (any, *apiError) {
	sg, err := cl.targetGroup()
	if err != nil {
		return nil, err
	}
	rules, err := cl.permissions()
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		if !slices.ContainsFunc(sg.Ingress, func(have Permission) bool { return sameRule(have, r) }) {
			return nil, badRequest("InvalidPermission.NotFound", "The specified rule does not exist in this security group.")
		}
	}
	for _, r := range rules {
		sg.Ingress = slices.DeleteFunc(sg.Ingress, func(have Permission) bool { return sameRule(have, r) })
	}
	return cl.ok("RevokeSecurityGroupIngress"), nil
}

func (cl *call) deleteSecurityGroup() (any, *apiError) {
	c := cl.c
	sg, err := cl.targetGroup()
	if err != nil {
		return nil, err
	}
	if sg.Name == "default" {
		return nil, badRequest("CannotDelete", "the specified group: \"%s\" name: \"default\" cannot be deleted by a user", sg.ID)
	}
	inUse := false
	for _, in := range c.instances {
		inUse = inUse || in.State != "terminated" && slices.Contains(in.SecurityGroups, sg.ID)
	}
	for _, lb := range c.loadBalancers {
		inUse = inUse || slices.Contains(lb.SecurityGroups, sg.ID)
	}
	for _, other := range c.securityGroups {
		for _, p := range other.Ingress {
			inUse = inUse || other.ID != sg.ID && slices.Contains(p.GroupIDs, sg.ID)
		}
	}
	if inUse {
		return nil, badRequest("DependencyViolation", "resource %s has a dependent object", sg.ID)
	}
	delete(c.securityGroups, sg.ID)
	return cl.ok("DeleteSecurityGroup"), nil
}
