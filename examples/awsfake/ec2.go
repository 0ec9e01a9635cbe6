package awsfake

import (
	"cmp"
	"encoding/base64"
	"encoding/xml"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

var ec2Actions = map[string]func(*call) (any, *apiError){
	"DescribeInstances":             (*call).describeInstances,
	"DescribeRouteTables":           (*call).describeRouteTables,
	"CreateRoute":                   (*call).createRoute,
	"DeleteRoute":                   (*call).deleteRoute,
	"DescribeSecurityGroups":        (*call).describeSecurityGroups,
	"CreateSecurityGroup":           (*call).createSecurityGroup,
	"AuthorizeSecurityGroupIngress": (*call).authorizeIngress,
	"RevokeSecurityGroupIngress":    (*call).revokeIngress,
	"DeleteSecurityGroup":           (*call).deleteSecurityGroup,
	"CreateTags":                    (*call).createTags,
	"DeleteTags":                    (*call).deleteTags,
	"DescribeAvailabilityZones":     (*call).describeAvailabilityZones,
	"DescribeSubnets":               (*call).describeSubnets,
	"DescribeVpcs":                  (*call).describeVpcs,
	"ModifyInstanceAttribute":       (*call).modifyInstanceAttribute,
}

// XML shapes of EC2 responses.
type (
	xmlTag struct {
		Key   string `xml:"key"`
		Value string `xml:"value"`
	}
	xmlGroup struct {
		GroupID   string `xml:"groupId"`
		GroupName string `xml:"groupName,omitempty"`
	}
	xmlAssociation struct {
		PublicIP      string `xml:"publicIp"`
		PublicDNSName string `xml:"publicDnsName"`
		IPOwnerID     string `xml:"ipOwnerId"`
	}
	xmlPrivateIP struct {
		PrivateIPAddress string          `xml:"privateIpAddress"`
		PrivateDNSName   string          `xml:"privateDnsName,omitempty"`
		Primary          bool            `xml:"primary"`
		Association      *xmlAssociation `xml:"association,omitempty"`
	}
	xmlNetworkInterface struct {
		NetworkInterfaceID string     `xml:"networkInterfaceId"`
		SubnetID           string     `xml:"subnetId"`
		VpcID              string     `xml:"vpcId"`
		OwnerID            string     `xml:"ownerId"`
		Status             string     `xml:"status"`
		MacAddress         string     `xml:"macAddress"`
		PrivateIPAddress   string     `xml:"privateIpAddress"`
		PrivateDNSName     string     `xml:"privateDnsName,omitempty"`
		SourceDestCheck    bool       `xml:"sourceDestCheck"`
		Groups             []xmlGroup `xml:"groupSet>item"`
		Attachment         struct {
			AttachmentID        string `xml:"attachmentId"`
			DeviceIndex         int    `xml:"deviceIndex"`
			Status              string `xml:"status"`
			DeleteOnTermination bool   `xml:"deleteOnTermination"`
		} `xml:"attachment"`
		Association   *xmlAssociation `xml:"association,omitempty"`
		PrivateIPs    []xmlPrivateIP  `xml:"privateIpAddressesSet>item"`
		InterfaceType string          `xml:"interfaceType"`
	}
	xmlInstance struct {
		InstanceID    string `xml:"instanceId"`
		ImageID       string `xml:"imageId"`
		InstanceState struct {
			Code int    `xml:"code"`
			Name string `xml:"name"`
		} `xml:"instanceState"`
		PrivateDNSName string `xml:"privateDnsName"`
		DNSName        string `xml:"dnsName"`
		Reason         string `xml:"reason"`
		AmiLaunchIndex int    `xml:"amiLaunchIndex"`
		InstanceType   string `xml:"instanceType"`
		LaunchTime     string `xml:"launchTime"`
		Placement      struct {
			AvailabilityZone string `xml:"availabilityZone"`
			Tenancy          string `xml:"tenancy"`
		} `xml:"placement"`
		Monitoring struct {
			State string `xml:"state"`
		} `xml:"monitoring"`
		SubnetID              string                `xml:"subnetId,omitempty"`
		VpcID                 string                `xml:"vpcId,omitempty"`
		PrivateIPAddress      string                `xml:"privateIpAddress,omitempty"`
		IPAddress             string                `xml:"ipAddress,omitempty"`
		SourceDestCheck       bool                  `xml:"sourceDestCheck"`
		Groups                []xmlGroup            `xml:"groupSet>item"`
		StateReason           *xmlStateReason       `xml:"stateReason,omitempty"`
		Architecture          string                `xml:"architecture"`
		RootDeviceType        string                `xml:"rootDeviceType"`
		RootDeviceName        string                `xml:"rootDeviceName"`
		VirtualizationType    string                `xml:"virtualizationType"`
		Tags                  []xmlTag              `xml:"tagSet>item"`
		Hypervisor            string                `xml:"hypervisor"`
		NetworkInterfaces     []xmlNetworkInterface `xml:"networkInterfaceSet>item"`
		EbsOptimized          bool                  `xml:"ebsOptimized"`
		PrivateDNSNameOptions struct {
			HostnameType string `xml:"hostnameType"`
		} `xml:"privateDnsNameOptions"`
	}
	xmlStateReason struct {
		Code    string `xml:"code"`
		Message string `xml:"message"`
	}
	xmlReservation struct {
		ReservationID string        `xml:"reservationId"`
		OwnerID       string        `xml:"ownerId"`
		Groups        []xmlGroup    `xml:"groupSet>item"`
		Instances     []xmlInstance `xml:"instancesSet>item"`
	}
	xmlReturn struct {
		XMLName   xml.Name
		NS        string `xml:"xmlns,attr"`
		RequestID string `xml:"requestId"`
		Return    bool   `xml:"return"`
	}
)

func (cl *call) ok(action string) xmlReturn {
	return xmlReturn{XMLName: xml.Name{Local: action + "Response"}, NS: ec2NS, RequestID: cl.requestID, Return: true}
}

func xmlTags(tags map[string]string) []xmlTag {
	var out []xmlTag
	for _, k := range sortedKeys(tags) {
		out = append(out, xmlTag{k, tags[k]})
	}
	return out
}

// instanceXML is the description of in, as DescribeInstances gives it.
func (c *Cloud) instanceXML(in *Instance) xmlInstance {
	x := xmlInstance{InstanceID: in.ID, ImageID: in.ImageID, PrivateDNSName: in.PrivateDNSName, DNSName: in.PublicDNSName,
		InstanceType: in.Type, LaunchTime: in.LaunchTime.UTC().Format("2006-01-02T15:04:05.000Z"), SubnetID: in.SubnetID, VpcID: in.VpcID,
		PrivateIPAddress: in.PrivateIP, IPAddress: in.PublicIP, SourceDestCheck: !in.NoSourceDestCheck, Architecture: "x86_64",
		RootDeviceType: "ebs", RootDeviceName: "/dev/xvda", VirtualizationType: "hvm", Tags: xmlTags(in.Tags), Hypervisor: "xen"}
	x.InstanceState.Code, x.InstanceState.Name = stateCodes[in.State], in.State
	x.Placement.AvailabilityZone, x.Placement.Tenancy = in.Zone, "default"
	x.Monitoring.State = "disabled"
	x.PrivateDNSNameOptions.HostnameType = "ip-name"
	for _, g := range in.SecurityGroups {
		xg := xmlGroup{GroupID: g}
		if sg := c.securityGroups[g]; sg != nil {
			xg.GroupName = sg.Name
		}
		x.Groups = append(x.Groups, xg)
	}
	switch in.State {
	case "terminated":
		x.Reason = "User initiated (" + in.LaunchTime.UTC().Format("2006-01-02 15:04:05 GMT") + ")"
		x.StateReason = &xmlStateReason{"Client.UserInitiatedShutdown", "Client.UserInitiatedShutdown: User initiated shutdown"}
		x.SubnetID, x.VpcID = "", ""
		return x
	case "stopped":
		x.Reason = "User initiated"
		x.StateReason = &xmlStateReason{"Client.UserInitiatedShutdown", "Client.UserInitiatedShutdown: User initiated shutdown"}
	}
	ni := xmlNetworkInterface{NetworkInterfaceID: "eni-" + in.ID[2:], SubnetID: in.SubnetID, VpcID: in.VpcID, OwnerID: AccountID,
		Status: "in-use", MacAddress: "0a:" + in.ID[len(in.ID)-10:len(in.ID)-8] + ":" + in.ID[len(in.ID)-8:len(in.ID)-6] + ":" +
			in.ID[len(in.ID)-6:len(in.ID)-4] + ":" + in.ID[len(in.ID)-4:len(in.ID)-2] + ":" + in.ID[len(in.ID)-2:],
		PrivateIPAddress: in.PrivateIP, PrivateDNSName: in.PrivateDNSName, SourceDestCheck: !in.NoSourceDestCheck, Groups: x.Groups,
		InterfaceType: "interface"}
	ni.Attachment.AttachmentID, ni.Attachment.Status, ni.Attachment.DeleteOnTermination = "eni-attach-"+in.ID[2:], "attached", true
	pip := xmlPrivateIP{PrivateIPAddress: in.PrivateIP, PrivateDNSName: in.PrivateDNSName, Primary: true}
	if in.PublicIP != "" {
		ni.Association = &xmlAssociation{in.PublicIP, in.PublicDNSName, "amazon"}
		pip.Association = ni.Association
	}
	ni.PrivateIPs = []xmlPrivateIP{pip}
	x.NetworkInterfaces = []xmlNetworkInterface{ni}
	return x
}

// describeInstances serves DescribeInstances: InstanceId.N, Filter.N,
// MaxResults (5 to 1000, not with InstanceId) and NextToken. Each
// instance is its own reservation, as when launched one at a time.
func (cl *call) describeInstances() (any, *apiError) {
	c := cl.c
	ids := cl.list("InstanceId")
	for _, id := range ids {
		if !validID(id, "i") {
			return nil, badRequest("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
	}
	maxResults, err := cl.intParam("MaxResults", 0)
	if err != nil {
		return nil, err
	}
	if cl.get("MaxResults") != "" {
		if len(ids) > 0 {
			return nil, badRequest("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
		}
		if maxResults < 5 || maxResults > 1000 {
			return nil, badRequest("InvalidParameterValue", "Value ( %d ) for parameter maxResults is invalid. Expecting a value between 5 and 1000.", maxResults)
		}
	}
	filters := cl.filters()
	// Eventual consistency: every request ages hidden and terminated
	// instances; what it cannot see yet it does not describe.
	visible := map[string]bool{}
	for _, id := range slices.Clone(c.order) {
		in := c.instances[id]
		switch {
		case in.hiddenFor > 0:
			in.hiddenFor--
			continue
		case in.State == "terminated" && c.opts.ForgetTerminatedAfter > 0:
			if in.describedTerminated >= c.opts.ForgetTerminatedAfter {
				c.removeInstance(id)
				continue
			}
			in.describedTerminated++
		}
		visible[id] = true
	}
	var missing []string
	for _, id := range ids {
		if !visible[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 1 {
		return nil, badRequest("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
	} else if len(missing) > 1 {
		return nil, badRequest("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
	}
	var list []*Instance
	for _, id := range c.order {
		in := c.instances[id]
		if !visible[id] || (len(ids) > 0 && !slices.Contains(ids, id)) {
			continue
		}
		ok, err := instanceMatches(in, filters)
		if err != nil {
			return nil, err
		}
		if ok {
			list = append(list, in)
		}
	}
	page, next, err := paginate(list, cmp.Or(maxResults, cl.c.opts.PageSize), cl.get("NextToken"))
	if err != nil {
		return nil, err
	}
	resp := struct {
		XMLName      xml.Name         `xml:"DescribeInstancesResponse"`
		NS           string           `xml:"xmlns,attr"`
		RequestID    string           `xml:"requestId"`
		Reservations []xmlReservation `xml:"reservationSet>item"`
		NextToken    string           `xml:"nextToken,omitempty"`
	}{NS: ec2NS, RequestID: cl.requestID, NextToken: next}
	for _, in := range page {
		resp.Reservations = append(resp.Reservations, xmlReservation{ReservationID: "r-" + in.ID[2:], OwnerID: AccountID,
			Instances: []xmlInstance{c.instanceXML(in)}})
	}
	return resp, nil
}

// modifyInstanceAttribute serves the attributes a CCM changes: source/
// destination checking (SourceDestCheck.Value, or Attribute=sourceDestCheck
// with Value) and security groups (GroupId.N).
func (cl *call) modifyInstanceAttribute() (any, *apiError) {
	id, err := cl.required("InstanceId")
	if err != nil {
		return nil, err
	}
	if !validID(id, "i") {
		return nil, badRequest("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
	}
	in := cl.c.instances[id]
	if in == nil || in.hiddenFor > 0 {
		return nil, badRequest("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
	}
	if in.State == "terminated" {
		return nil, badRequest("IncorrectInstanceState", "The instance '%s' is not in a state from which it can be modified.", id)
	}
	sdc := cl.get("SourceDestCheck.Value")
	if cl.get("Attribute") == "sourceDestCheck" {
		sdc = cl.get("Value")
	}
	groups := cl.list("GroupId")
	switch {
	case sdc == "true" || sdc == "false":
		in.NoSourceDestCheck = sdc == "false"
	case len(groups) > 0:
		for _, g := range groups {
			if sg := cl.c.securityGroups[g]; sg == nil || sg.VpcID != in.VpcID {
				return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist in VPC '%s'", g, in.VpcID)
			}
		}
		in.SecurityGroups = groups
	default:
		return nil, badRequest("InvalidParameterCombination", "No attribute specified, or one this fake does not change (sourceDestCheck and groupSet are served).")
	}
	return cl.ok("ModifyInstanceAttribute"), nil
}

func instanceMatches(in *Instance, filters []filter) (bool, *apiError) {
	return matchFilters(filters, in.Tags, true, func(name string) ([]string, bool) {
		switch name {
		case "instance-id":
			return []string{in.ID}, true
		case "private-dns-name":
			return []string{in.PrivateDNSName}, true
		case "dns-name":
			return []string{in.PublicDNSName}, true
		case "instance-state-name":
			return []string{in.State}, true
		case "instance-state-code":
			return []string{strconv.Itoa(stateCodes[in.State])}, true
		case "availability-zone":
			return []string{in.Zone}, true
		case "vpc-id":
			return []string{in.VpcID}, true
		case "subnet-id":
			return []string{in.SubnetID}, true
		case "private-ip-address", "network-interface.addresses.private-ip-address":
			return []string{in.PrivateIP}, true
		case "ip-address":
			return []string{in.PublicIP}, true
		case "instance-type":
			return []string{in.Type}, true
		case "instance.group-id":
			return in.SecurityGroups, true
		}
		return nil, false
	})
}

// paginate cuts list at the opaque token and returns the next one; no
// maxResults means everything.
func paginate[T any](list []T, maxResults int, token string) ([]T, string, *apiError) {
	start := 0
	if token != "" {
		b, err := base64.RawURLEncoding.DecodeString(token)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "offset:"))
		if err != nil || err2 != nil || !strings.HasPrefix(string(b), "offset:") || n < 0 || n > len(list) {
			return nil, "", badRequest("InvalidParameterValue", "The specified nextToken is not valid")
		}
		start = n
	}
	if maxResults <= 0 || start+maxResults >= len(list) {
		return list[start:], "", nil
	}
	end := start + maxResults
	return list[start:end], base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(end))), nil
}

// Route tables.

type xmlRoute struct {
	DestinationCidrBlock string `xml:"destinationCidrBlock"`
	GatewayID            string `xml:"gatewayId,omitempty"`
	InstanceID           string `xml:"instanceId,omitempty"`
	InstanceOwnerID      string `xml:"instanceOwnerId,omitempty"`
	NetworkInterfaceID   string `xml:"networkInterfaceId,omitempty"`
	State                string `xml:"state"`
	Origin               string `xml:"origin"`
}

type xmlRouteTable struct {
	RouteTableID string     `xml:"routeTableId"`
	VpcID        string     `xml:"vpcId"`
	OwnerID      string     `xml:"ownerId"`
	Routes       []xmlRoute `xml:"routeSet>item"`
	Associations []struct {
		RouteTableAssociationID string `xml:"routeTableAssociationId"`
		RouteTableID            string `xml:"routeTableId"`
		SubnetID                string `xml:"subnetId,omitempty"`
		Main                    bool   `xml:"main"`
		AssociationState        struct {
			State string `xml:"state"`
		} `xml:"associationState"`
	} `xml:"associationSet>item"`
	Tags []xmlTag `xml:"tagSet>item"`
}

func (c *Cloud) routeTableXML(rt *RouteTable) xmlRouteTable {
	x := xmlRouteTable{RouteTableID: rt.ID, VpcID: rt.VpcID, OwnerID: AccountID, Tags: xmlTags(rt.Tags)}
	for _, r := range rt.Routes {
		xr := xmlRoute{DestinationCidrBlock: r.DestinationCIDR, GatewayID: r.GatewayID, InstanceID: r.InstanceID,
			NetworkInterfaceID: r.NetworkInterfaceID, State: "active", Origin: r.Origin}
		if r.InstanceID != "" {
			xr.InstanceOwnerID = AccountID
			if in := c.instances[r.InstanceID]; in == nil || in.State == "terminated" {
				xr.State = "blackhole"
			} else if xr.NetworkInterfaceID == "" {
				xr.NetworkInterfaceID = "eni-" + in.ID[2:]
			}
		}
		x.Routes = append(x.Routes, xr)
	}
	assoc := func(subnet string, main bool) {
		x.Associations = append(x.Associations, struct {
			RouteTableAssociationID string `xml:"routeTableAssociationId"`
			RouteTableID            string `xml:"routeTableId"`
			SubnetID                string `xml:"subnetId,omitempty"`
			Main                    bool   `xml:"main"`
			AssociationState        struct {
				State string `xml:"state"`
			} `xml:"associationState"`
		}{RouteTableAssociationID: "rtbassoc-" + rt.ID[4:], RouteTableID: rt.ID, SubnetID: subnet, Main: main,
			AssociationState: struct {
				State string `xml:"state"`
			}{"associated"}})
	}
	if rt.Main {
		assoc("", true)
	}
	for _, s := range rt.Subnets {
		assoc(s, false)
	}
	return x
}

func (cl *call) describeRouteTables() (any, *apiError) {
	c := cl.c
	ids := cl.list("RouteTableId")
	for _, id := range ids {
		if c.routeTables[id] == nil {
			return nil, badRequest("InvalidRouteTableID.NotFound", "The routeTable ID '%s' does not exist", id)
		}
	}
	filters := cl.filters()
	var list []*RouteTable
	for _, id := range sortedKeys(c.routeTables) {
		rt := c.routeTables[id]
		if len(ids) > 0 && !slices.Contains(ids, id) {
			continue
		}
		ok, err := matchFilters(filters, rt.Tags, true, func(name string) ([]string, bool) {
			switch name {
			case "route-table-id":
				return []string{rt.ID}, true
			case "vpc-id":
				return []string{rt.VpcID}, true
			case "association.main":
				return []string{strconv.FormatBool(rt.Main)}, true
			case "association.subnet-id":
				return rt.Subnets, true
			}
			return nil, false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			list = append(list, rt)
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
	resp := struct {
		XMLName     xml.Name        `xml:"DescribeRouteTablesResponse"`
		NS          string          `xml:"xmlns,attr"`
		RequestID   string          `xml:"requestId"`
		RouteTables []xmlRouteTable `xml:"routeTableSet>item"`
		NextToken   string          `xml:"nextToken,omitempty"`
	}{NS: ec2NS, RequestID: cl.requestID, NextToken: next}
	for _, rt := range page {
		resp.RouteTables = append(resp.RouteTables, c.routeTableXML(rt))
	}
	return resp, nil
}

// routeTarget reads the route table and destination of CreateRoute and
// DeleteRoute.
func (cl *call) routeTarget() (*RouteTable, string, *apiError) {
	id, err := cl.required("RouteTableId")
	if err != nil {
		return nil, "", err
	}
	dest, err := cl.required("DestinationCidrBlock")
	if err != nil {
		return nil, "", err
	}
	p, perr := netip.ParsePrefix(dest)
	if perr != nil || !p.Addr().Is4() {
		return nil, "", badRequest("InvalidParameterValue", "Value (%s) for parameter destinationCidrBlock is invalid. This is not a valid CIDR block.", dest)
	}
	rt := cl.c.routeTables[id]
	if rt == nil {
		return nil, "", badRequest("InvalidRouteTableID.NotFound", "The routeTable ID '%s' does not exist", id)
	}
	return rt, p.Masked().String(), nil
}

func (cl *call) createRoute() (any, *apiError) {
	rt, dest, err := cl.routeTarget()
	if err != nil {
		return nil, err
	}
	r := Route{DestinationCIDR: dest, GatewayID: cl.get("GatewayId"), InstanceID: cl.get("InstanceId"),
		NetworkInterfaceID: cl.get("NetworkInterfaceId"), Origin: "CreateRoute"}
	targets := 0
	for _, t := range []string{r.GatewayID, r.InstanceID, r.NetworkInterfaceID} {
		if t != "" {
			targets++
		}
	}
	if targets != 1 {
		return nil, badRequest("InvalidParameterCombination", "The request must contain exactly one of gatewayId, networkInterfaceId, vpcPeeringConnectionId or instanceId")
	}
	if r.InstanceID != "" {
		if !validID(r.InstanceID, "i") {
			return nil, badRequest("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", r.InstanceID)
		}
		in := cl.c.instances[r.InstanceID]
		if in == nil || in.State == "terminated" {
			return nil, badRequest("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", r.InstanceID)
		}
	}
	for _, have := range rt.Routes {
		if have.DestinationCIDR == dest {
			return nil, badRequest("RouteAlreadyExists", "The route identified by %s already exists.", dest)
		}
	}
	rt.Routes = append(rt.Routes, r)
	return cl.ok("CreateRoute"), nil
}

func (cl *call) deleteRoute() (any, *apiError) {
	rt, dest, err := cl.routeTarget()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(rt.Routes, func(r Route) bool { return r.DestinationCIDR == dest })
	if i < 0 {
		return nil, badRequest("InvalidRoute.NotFound", "no route with destination-cidr-block %s in route table %s", dest, rt.ID)
	}
	if rt.Routes[i].GatewayID == "local" {
		return nil, badRequest("InvalidParameterValue", "cannot remove local route %s in route table %s", dest, rt.ID)
	}
	rt.Routes = slices.Delete(rt.Routes, i, i+1)
	return cl.ok("DeleteRoute"), nil
}

// Tags.

// taggable returns the tags of the resource with the given ID.
func (c *Cloud) taggable(id string) (map[string]string, *apiError) {
	var tags map[string]string
	prefix, _, _ := strings.Cut(id, "-")
	switch prefix {
	case "i":
		if in := c.instances[id]; in != nil {
			tags = in.Tags
		}
	case "rtb":
		if rt := c.routeTables[id]; rt != nil {
			tags = rt.Tags
		}
	case "sg":
		if sg := c.securityGroups[id]; sg != nil {
			tags = sg.Tags
		}
	case "subnet":
		if s := c.subnets[id]; s != nil {
			tags = s.Tags
		}
	case "vpc":
		if v := c.vpcs[id]; v != nil {
			tags = v.Tags
		}
	default:
		return nil, badRequest("InvalidID", "The ID '%s' is not valid", id)
	}
	if tags == nil {
		code := map[string]string{"i": "InvalidInstanceID.NotFound", "rtb": "InvalidRouteTableID.NotFound", "sg": "InvalidGroup.NotFound",
			"subnet": "InvalidSubnetID.NotFound", "vpc": "InvalidVpcID.NotFound"}[prefix]
		return nil, badRequest(code, "The ID '%s' does not exist", id)
	}
	return tags, nil
}

func (cl *call) createTags() (any, *apiError) {
	ids := cl.list("ResourceId")
	if len(ids) == 0 {
		return nil, badRequest("MissingParameter", "The request must contain the parameter resourceIdSet")
	}
	tags := cl.tags("Tag")
	var targets []map[string]string
	for _, id := range ids {
		t, err := cl.c.taggable(id)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	for _, t := range targets {
		for k, v := range tags {
			t[k] = v
		}
	}
	return cl.ok("CreateTags"), nil
}

func (cl *call) deleteTags() (any, *apiError) {
	ids := cl.list("ResourceId")
	var keys []string
	for _, p := range cl.structs("Tag") {
		keys = append(keys, cl.get(p+"Key"))
	}
	for _, id := range ids {
		t, err := cl.c.taggable(id)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			delete(t, k)
		}
	}
	return cl.ok("DeleteTags"), nil
}

// Zones, subnets, VPCs.

func (cl *call) describeAvailabilityZones() (any, *apiError) {
	type zone struct {
		ZoneName    string `xml:"zoneName"`
		ZoneID      string `xml:"zoneId"`
		ZoneState   string `xml:"zoneState"`
		RegionName  string `xml:"regionName"`
		ZoneType    string `xml:"zoneType"`
		OptInStatus string `xml:"optInStatus"`
		GroupName   string `xml:"groupName"`
	}
	names := cl.list("ZoneName")
	filters := cl.filters()
	resp := struct {
		XMLName   xml.Name `xml:"DescribeAvailabilityZonesResponse"`
		NS        string   `xml:"xmlns,attr"`
		RequestID string   `xml:"requestId"`
		Zones     []zone   `xml:"availabilityZoneInfo>item"`
	}{NS: ec2NS, RequestID: cl.requestID}
	for _, n := range names {
		if !slices.Contains(cl.c.zones(), n) {
			return nil, badRequest("InvalidParameterValue", "The zone '%s' does not exist.", n)
		}
	}
	for i, z := range cl.c.zones() {
		if len(names) > 0 && !slices.Contains(names, z) {
			continue
		}
		x := zone{ZoneName: z, ZoneID: "use1-az" + strconv.Itoa(i+1), ZoneState: "available", RegionName: cl.c.opts.Region,
			ZoneType: "availability-zone", OptInStatus: "opt-in-not-required", GroupName: cl.c.opts.Region}
		ok, err := matchFilters(filters, nil, false, func(name string) ([]string, bool) {
			switch name {
			case "zone-name":
				return []string{z}, true
			case "zone-id":
				return []string{x.ZoneID}, true
			case "region-name":
				return []string{x.RegionName}, true
			case "state":
				return []string{"available"}, true
			case "zone-type":
				return []string{x.ZoneType}, true
			}
			return nil, false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			resp.Zones = append(resp.Zones, x)
		}
	}
	return resp, nil
}

func (cl *call) describeSubnets() (any, *apiError) {
	type subnet struct {
		SubnetID                string   `xml:"subnetId"`
		SubnetArn               string   `xml:"subnetArn"`
		State                   string   `xml:"state"`
		VpcID                   string   `xml:"vpcId"`
		OwnerID                 string   `xml:"ownerId"`
		CidrBlock               string   `xml:"cidrBlock"`
		AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
		AvailabilityZone        string   `xml:"availabilityZone"`
		DefaultForAz            bool     `xml:"defaultForAz"`
		MapPublicIPOnLaunch     bool     `xml:"mapPublicIpOnLaunch"`
		Tags                    []xmlTag `xml:"tagSet>item"`
	}
	c := cl.c
	ids := cl.list("SubnetId")
	for _, id := range ids {
		if c.subnets[id] == nil {
			return nil, badRequest("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	filters := cl.filters()
	var list []subnet
	for _, s := range c.sortedSubnets() {
		if len(ids) > 0 && !slices.Contains(ids, s.ID) {
			continue
		}
		ok, err := matchFilters(filters, s.Tags, true, func(name string) ([]string, bool) {
			switch name {
			case "subnet-id":
				return []string{s.ID}, true
			case "vpc-id":
				return []string{s.VpcID}, true
			case "availability-zone":
				return []string{s.Zone}, true
			case "cidr-block", "cidr":
				return []string{s.CIDR}, true
			case "default-for-az":
				return []string{strconv.FormatBool(s.Default)}, true
			case "state":
				return []string{"available"}, true
			}
			return nil, false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			list = append(list, subnet{SubnetID: s.ID, SubnetArn: "arn:aws:ec2:" + c.opts.Region + ":" + AccountID + ":subnet/" + s.ID,
				State: "available", VpcID: s.VpcID, OwnerID: AccountID, CidrBlock: s.CIDR, AvailableIPAddressCount: 251,
				AvailabilityZone: s.Zone, DefaultForAz: s.Default, MapPublicIPOnLaunch: s.Default, Tags: xmlTags(s.Tags)})
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
		XMLName   xml.Name `xml:"DescribeSubnetsResponse"`
		NS        string   `xml:"xmlns,attr"`
		RequestID string   `xml:"requestId"`
		Subnets   []subnet `xml:"subnetSet>item"`
		NextToken string   `xml:"nextToken,omitempty"`
	}{NS: ec2NS, RequestID: cl.requestID, Subnets: page, NextToken: next}, nil
}

func (cl *call) describeVpcs() (any, *apiError) {
	type vpc struct {
		VpcID           string   `xml:"vpcId"`
		OwnerID         string   `xml:"ownerId"`
		State           string   `xml:"state"`
		CidrBlock       string   `xml:"cidrBlock"`
		DhcpOptionsID   string   `xml:"dhcpOptionsId"`
		InstanceTenancy string   `xml:"instanceTenancy"`
		IsDefault       bool     `xml:"isDefault"`
		Tags            []xmlTag `xml:"tagSet>item"`
	}
	c := cl.c
	ids := cl.list("VpcId")
	for _, id := range ids {
		if c.vpcs[id] == nil {
			return nil, badRequest("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", id)
		}
	}
	filters := cl.filters()
	resp := struct {
		XMLName   xml.Name `xml:"DescribeVpcsResponse"`
		NS        string   `xml:"xmlns,attr"`
		RequestID string   `xml:"requestId"`
		Vpcs      []vpc    `xml:"vpcSet>item"`
	}{NS: ec2NS, RequestID: cl.requestID}
	for _, id := range sortedKeys(c.vpcs) {
		v := c.vpcs[id]
		if len(ids) > 0 && !slices.Contains(ids, id) {
			continue
		}
		ok, err := matchFilters(filters, v.Tags, true, func(name string) ([]string, bool) {
			switch name {
			case "vpc-id":
				return []string{v.ID}, true
			case "cidr", "cidr-block":
				return []string{v.CIDR}, true
			case "is-default", "isDefault":
				return []string{strconv.FormatBool(v.Default)}, true
			case "state":
				return []string{"available"}, true
			}
			return nil, false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			resp.Vpcs = append(resp.Vpcs, vpc{VpcID: v.ID, OwnerID: AccountID, State: "available", CidrBlock: v.CIDR,
				DhcpOptionsID: "dopt-0fa4e000", InstanceTenancy: "default", IsDefault: v.Default, Tags: xmlTags(v.Tags)})
		}
	}
	return resp, nil
}
