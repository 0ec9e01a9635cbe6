package awsfake_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/faultinject"
)

// The fake is driven with the official aws-sdk-go-v2 clients, pointed at
// it with BaseEndpoint and static credentials: whatever they sign, send,
// parse and paginate is what they do against AWS.

type clients struct {
	cloud *awsfake.Cloud
	srv   *httptest.Server
	ec2   *ec2.Client
	elb   *elb.Client
}

func newClients(t *testing.T, opts awsfake.Options) clients {
	t.Helper()
	cloud := awsfake.New(opts)
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	return clients{cloud: cloud, srv: srv,
		ec2: ec2.NewFromConfig(sdkConfig(srv, awsfake.DefaultAccessKeyID, awsfake.DefaultSecretAccessKey, 1)),
		elb: elb.NewFromConfig(sdkConfig(srv, awsfake.DefaultAccessKeyID, awsfake.DefaultSecretAccessKey, 1))}
}

// sdkConfig configures a client for the fake; attempts is the SDK's
// retry budget, with no backoff delay. Request bodies go through
// bufferedBodies.
func sdkConfig(srv *httptest.Server, key, secret string, attempts int) aws.Config {
	return aws.Config{Region: awsfake.DefaultRegion, BaseEndpoint: aws.String(srv.URL), HTTPClient: &http.Client{Transport: bufferedBodies{srv.Client().Transport}},
		Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		}}
}

// bufferedBodies hands net/http a copy of each request body. Without it,
// aws-sdk-go-v2 requests to a server as quick as an in-process one fail now
// and then with "use of closed network connection": once a body of
// ContentLength bytes is written, net/http's writeLoop reads it once more to
// check that nothing is left, the SDK has by then been answered and closed
// its body stream, the read fails and writeLoop closes the connection while
// the answer is being read (as in aws/aws-sdk-go-v2 issues #1825 and
// #2737). The bytes sent, and so the signature, are the SDK's own.
type bufferedBodies struct{ next http.RoundTripper }

func (b bufferedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return b.next.RoundTrip(r)
}

// apiCode returns the API error code the SDK decoded, and the HTTP status.
func apiCode(t *testing.T, err error) (string, int) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want an API error, got %v", err)
	}
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return ae.ErrorCode(), status
}

func wantCode(t *testing.T, err error, code string, status int) {
	t.Helper()
	got, gotStatus := apiCode(t, err)
	if got != code || gotStatus != status {
		t.Fatalf("error %v: code %s, status %d; want %s, %d", err, got, gotStatus, code, status)
	}
}

func filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

func TestDescribeInstances(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	ctx := context.Background()
	var ids []string
	for i := range 23 {
		in, err := cl.cloud.AddInstance(awsfake.Instance{Zone: awsfake.DefaultRegion + string(rune('a'+i%3)),
			Tags: map[string]string{"Name": fmt.Sprintf("node-%d", i), "kubernetes.io/cluster/c1": "owned"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, in.ID)
	}
	if _, err := cl.cloud.AddInstance(awsfake.Instance{Tags: map[string]string{"Name": "other"}, NoPublicIP: true}); err != nil {
		t.Fatal(err)
	}
	public := map[string]bool{}
	for _, in := range cl.cloud.Instances() {
		if in.PublicIP != "" && public[in.PublicIP] {
			t.Fatalf("public address %s given twice", in.PublicIP)
		}
		public[in.PublicIP] = true
	}
	if err := cl.cloud.StopInstance(ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := cl.cloud.TerminateInstance(ids[2]); err != nil {
		t.Fatal(err)
	}

	// Pagination with NextToken, as the SDK's paginator follows it.
	var all []ec2types.Instance
	pages := 0
	p := ec2.NewDescribeInstancesPaginator(cl.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range out.Reservations {
			all = append(all, r.Instances...)
		}
	}
	if len(all) != 24 || pages != 5 {
		t.Fatalf("paginated: %d instances in %d pages; want 24 in 5", len(all), pages)
	}

	// One instance as the SDK decodes it, every field the CCM reads.
	node3, _ := cl.cloud.Instance(ids[3])
	out, err := cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{filter("private-dns-name", node3.PrivateDNSName)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("private-dns-name filter: %+v", out.Reservations)
	}
	in := out.Reservations[0].Instances[0]
	if aws.ToString(in.InstanceId) != ids[3] || in.State.Name != ec2types.InstanceStateNameRunning || aws.ToInt32(in.State.Code) != 16 ||
		aws.ToString(in.PrivateDnsName) != "ip-10-0-1-5.ec2.internal" || aws.ToString(in.PrivateIpAddress) != "10.0.1.5" ||
		aws.ToString(in.PublicIpAddress) == "" || !strings.HasSuffix(aws.ToString(in.PublicDnsName), ".compute-1.amazonaws.com") ||
		aws.ToString(in.Placement.AvailabilityZone) != "us-east-1a" || in.InstanceType != ec2types.InstanceTypeT3Medium ||
		aws.ToString(in.VpcId) == "" || aws.ToString(in.SubnetId) == "" || len(in.SecurityGroups) != 1 ||
		aws.ToString(in.SecurityGroups[0].GroupName) != "default" || in.LaunchTime == nil {
		t.Fatalf("instance as the SDK decodes it: %+v", in)
	}
	if len(in.NetworkInterfaces) != 1 || aws.ToInt32(in.NetworkInterfaces[0].Attachment.DeviceIndex) != 0 ||
		len(in.NetworkInterfaces[0].PrivateIpAddresses) != 1 ||
		aws.ToString(in.NetworkInterfaces[0].PrivateIpAddresses[0].PrivateIpAddress) != "10.0.1.5" ||
		aws.ToString(in.NetworkInterfaces[0].Association.PublicIp) != aws.ToString(in.PublicIpAddress) {
		t.Fatalf("network interfaces: %+v", in.NetworkInterfaces)
	}
	tags := map[string]string{}
	for _, tag := range in.Tags {
		tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if tags["Name"] != "node-3" || tags["kubernetes.io/cluster/c1"] != "owned" {
		t.Fatalf("tags: %v", tags)
	}

	count := func(in *ec2.DescribeInstancesInput) int {
		t.Helper()
		out, err := cl.ec2.DescribeInstances(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range out.Reservations {
			n += len(r.Instances)
		}
		return n
	}
	for name, c := range map[string]struct {
		in   *ec2.DescribeInstancesInput
		want int
	}{
		"instance IDs":        {&ec2.DescribeInstancesInput{InstanceIds: ids[:4]}, 4},
		"cluster tag":         {&ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("tag:kubernetes.io/cluster/c1", "owned")}}, 23},
		"tag-key":             {&ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("tag-key", "kubernetes.io/cluster/c1")}}, 23},
		"wildcard tag":        {&ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("tag:Name", "node-1*")}}, 11},
		"running":             {&ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("instance-state-name", "running")}}, 22},
		"not terminated":      {&ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("instance-state-name", "pending", "running", "stopping", "stopped")}}, 23},
		"zone and tag (AND)":  {&ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("availability-zone", "us-east-1b"), filter("tag:Name", "node-*")}}, 8},
		"ID list and filter":  {&ec2.DescribeInstancesInput{InstanceIds: ids[:4], Filters: []ec2types.Filter{filter("instance-state-name", "running")}}, 2},
		"instance-id filter":  {&ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("instance-id", ids[5], "i-00000000000000000")}}, 1},
		"empty filter result": {&ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("private-dns-name", "nope")}}, 0},
	} {
		if got := count(c.in); got != c.want {
			t.Errorf("%s: %d instances, want %d", name, got, c.want)
		}
	}

	stopped, err := cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{ids[1], ids[2]}})
	if err != nil {
		t.Fatal(err)
	}
	st, term := stopped.Reservations[0].Instances[0], stopped.Reservations[1].Instances[0]
	if st.State.Name != ec2types.InstanceStateNameStopped || st.PublicIpAddress != nil || aws.ToString(st.PrivateDnsName) == "" ||
		term.State.Name != ec2types.InstanceStateNameTerminated || aws.ToString(term.PrivateDnsName) != "" || term.PrivateIpAddress != nil {
		t.Fatalf("stopped %+v / terminated %+v", st, term)
	}

	// Errors, with the real API's codes.
	_, err = cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{ids[0], "i-0123456789abcdef0"}})
	wantCode(t, err, "InvalidInstanceID.NotFound", 400)
	_, err = cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"node-a"}})
	wantCode(t, err, "InvalidInstanceID.Malformed", 400)
	_, err = cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids[:1], MaxResults: aws.Int32(5)})
	wantCode(t, err, "InvalidParameterCombination", 400)
	_, err = cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(2)})
	wantCode(t, err, "InvalidParameterValue", 400)
	_, err = cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("bogus", "x")}})
	wantCode(t, err, "InvalidParameterValue", 400)
	_, err = cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5), NextToken: aws.String("garbage")})
	wantCode(t, err, "InvalidParameterValue", 400)
}

func TestEventualConsistency(t *testing.T) {
	cl := newClients(t, awsfake.Options{HideNewInstances: 2, ForgetTerminatedAfter: 2})
	ctx := context.Background()
	in, err := cl.cloud.AddInstance(awsfake.Instance{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{in.ID}})
		wantCode(t, err, "InvalidInstanceID.NotFound", 400)
	}
	if _, err := cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{in.ID}}); err != nil {
		t.Fatalf("third request: %v; the instance should be visible", err)
	}
	if err := cl.cloud.TerminateInstance(in.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, err := cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{in.ID}})
		if err != nil || out.Reservations[0].Instances[0].State.Name != ec2types.InstanceStateNameTerminated {
			t.Fatalf("terminated instance: %v, %v", out, err)
		}
	}
	_, err = cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{in.ID}})
	wantCode(t, err, "InvalidInstanceID.NotFound", 400)
}

func TestRoutes(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	ctx := context.Background()
	rt, err := cl.cloud.AddRouteTable("", map[string]string{"kubernetes.io/cluster/c1": "owned"})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cl.cloud.AddInstance(awsfake.Instance{})
	b, _ := cl.cloud.AddInstance(awsfake.Instance{})

	tables, err := cl.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{
		Filters: []ec2types.Filter{filter("tag:kubernetes.io/cluster/c1", "owned")}})
	if err != nil || len(tables.RouteTables) != 1 || aws.ToString(tables.RouteTables[0].RouteTableId) != rt.ID {
		t.Fatalf("route tables by cluster tag: %+v, %v", tables, err)
	}
	for i, in := range []awsfake.Instance{a, b} {
		if _, err := cl.ec2.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String(rt.ID),
			DestinationCidrBlock: aws.String(fmt.Sprintf("10.244.%d.0/24", i)), InstanceId: aws.String(in.ID)}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = cl.ec2.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String(rt.ID),
		DestinationCidrBlock: aws.String("10.244.0.0/24"), InstanceId: aws.String(b.ID)})
	wantCode(t, err, "RouteAlreadyExists", 400)
	_, err = cl.ec2.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String("rtb-0123456789abcdef0"),
		DestinationCidrBlock: aws.String("10.244.9.0/24"), InstanceId: aws.String(b.ID)})
	wantCode(t, err, "InvalidRouteTableID.NotFound", 400)
	_, err = cl.ec2.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String(rt.ID),
		DestinationCidrBlock: aws.String("10.244.9.0/24"), InstanceId: aws.String("i-0123456789abcdef0")})
	wantCode(t, err, "InvalidInstanceID.NotFound", 400)

	// The route controller turns off source/destination checks.
	if _, err := cl.ec2.ModifyInstanceAttribute(ctx, &ec2.ModifyInstanceAttributeInput{InstanceId: aws.String(a.ID),
		SourceDestCheck: &ec2types.AttributeBooleanValue{Value: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	desc, err := cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{a.ID, b.ID}})
	if err != nil || aws.ToBool(desc.Reservations[0].Instances[0].SourceDestCheck) || !aws.ToBool(desc.Reservations[1].Instances[0].SourceDestCheck) {
		t.Fatalf("source/destination checks after ModifyInstanceAttribute: %+v, %v", desc, err)
	}
	_, err = cl.ec2.ModifyInstanceAttribute(ctx, &ec2.ModifyInstanceAttributeInput{InstanceId: aws.String("i-0123456789abcdef0"),
		SourceDestCheck: &ec2types.AttributeBooleanValue{Value: aws.Bool(false)}})
	wantCode(t, err, "InvalidInstanceID.NotFound", 400)

	if err := cl.cloud.TerminateInstance(b.ID); err != nil {
		t.Fatal(err)
	}
	tables, err = cl.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{RouteTableIds: []string{rt.ID}})
	if err != nil {
		t.Fatal(err)
	}
	routes := tables.RouteTables[0].Routes
	if len(routes) != 3 || aws.ToString(routes[0].GatewayId) != "local" || routes[0].Origin != ec2types.RouteOriginCreateRouteTable ||
		aws.ToString(routes[1].InstanceId) != a.ID || routes[1].State != ec2types.RouteStateActive || routes[1].Origin != ec2types.RouteOriginCreateRoute ||
		aws.ToString(routes[2].InstanceId) != b.ID || routes[2].State != ec2types.RouteStateBlackhole {
		t.Fatalf("routes as the SDK decodes them: %+v", routes)
	}
	if _, err := cl.ec2.DeleteRoute(ctx, &ec2.DeleteRouteInput{RouteTableId: aws.String(rt.ID), DestinationCidrBlock: aws.String("10.244.1.0/24")}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.ec2.DeleteRoute(ctx, &ec2.DeleteRouteInput{RouteTableId: aws.String(rt.ID), DestinationCidrBlock: aws.String("10.244.1.0/24")})
	wantCode(t, err, "InvalidRoute.NotFound", 400)
	if got, _ := cl.cloud.RouteTable(rt.ID); len(got.Routes) != 2 {
		t.Fatalf("after delete: %+v", got.Routes)
	}
	all, err := cl.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{})
	if err != nil || len(all.RouteTables) != 2 {
		t.Fatalf("all route tables: %+v, %v", all, err)
	}
}

func TestSecurityGroupsAndTags(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	ctx := context.Background()
	vpc := cl.cloud.DefaultVpc()
	created, err := cl.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("k8s-elb-a1"),
		Description: aws.String("Security group for Kubernetes ELB a1"), VpcId: aws.String(vpc.ID)})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(created.GroupId)
	_, err = cl.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("k8s-elb-a1"),
		Description: aws.String("again"), VpcId: aws.String(vpc.ID)})
	wantCode(t, err, "InvalidGroup.Duplicate", 400)
	if _, err := cl.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id},
		Tags: []ec2types.Tag{{Key: aws.String("kubernetes.io/cluster/c1"), Value: aws.String("owned")}}}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"sg-0123456789abcdef0"},
		Tags: []ec2types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}})
	wantCode(t, err, "InvalidGroup.NotFound", 400)

	perms := []ec2types.IpPermission{
		{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(80), ToPort: aws.Int32(80), IpRanges: []ec2types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}}},
		{IpProtocol: aws.String("icmp"), FromPort: aws.Int32(3), ToPort: aws.Int32(4), IpRanges: []ec2types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}}},
	}
	if _, err := cl.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: perms}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: perms[:1]})
	wantCode(t, err, "InvalidPermission.Duplicate", 400)
	// The nodes' group lets the load balancer's group in.
	nodes := cl.cloud.SecurityGroups()[0]
	if _, err := cl.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(nodes.ID),
		IpPermissions: []ec2types.IpPermission{{IpProtocol: aws.String("-1"), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: aws.String(id)}}}}}); err != nil {
		t.Fatal(err)
	}

	out, err := cl.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
		filter("group-name", "k8s-elb-a1"), filter("vpc-id", vpc.ID), filter("tag:kubernetes.io/cluster/c1", "owned")}})
	if err != nil || len(out.SecurityGroups) != 1 {
		t.Fatalf("describe by name, VPC and tag: %+v, %v", out, err)
	}
	sg := out.SecurityGroups[0]
	if aws.ToString(sg.GroupId) != id || aws.ToString(sg.Description) != "Security group for Kubernetes ELB a1" ||
		len(sg.IpPermissions) != 2 || aws.ToInt32(sg.IpPermissions[0].FromPort) != 80 || aws.ToString(sg.IpPermissions[0].IpRanges[0].CidrIp) != "0.0.0.0/0" ||
		len(sg.IpPermissionsEgress) != 1 || aws.ToString(sg.IpPermissionsEgress[0].IpProtocol) != "-1" || len(sg.Tags) != 1 {
		t.Fatalf("group as the SDK decodes it: %+v", sg)
	}
	byID, err := cl.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{nodes.ID}})
	if err != nil || len(byID.SecurityGroups[0].IpPermissions) != 2 ||
		aws.ToString(byID.SecurityGroups[0].IpPermissions[1].UserIdGroupPairs[0].GroupId) != id {
		t.Fatalf("nodes' group: %+v, %v", byID, err)
	}
	referencing, err := cl.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("ip-permission.group-id", id)}})
	if err != nil || len(referencing.SecurityGroups) != 1 || aws.ToString(referencing.SecurityGroups[0].GroupId) != nodes.ID {
		t.Fatalf("groups whose rules name %s: %+v, %v", id, referencing, err)
	}
	_, err = cl.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-0123456789abcdef0"}})
	wantCode(t, err, "InvalidGroup.NotFound", 400)

	// Referenced by another group: not deletable until revoked.
	_, err = cl.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
	wantCode(t, err, "DependencyViolation", 400)
	if _, err := cl.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(nodes.ID),
		IpPermissions: []ec2types.IpPermission{{IpProtocol: aws.String("-1"), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: aws.String(id)}}}}}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(id),
		IpPermissions: []ec2types.IpPermission{{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(443), ToPort: aws.Int32(443),
			IpRanges: []ec2types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}}}}})
	wantCode(t, err, "InvalidPermission.NotFound", 400)
	if _, err := cl.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
	wantCode(t, err, "InvalidGroup.NotFound", 400)
}

func TestZonesSubnetsVpcs(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	ctx := context.Background()
	zones, err := cl.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil || len(zones.AvailabilityZones) != 3 || aws.ToString(zones.AvailabilityZones[0].ZoneName) != "us-east-1a" ||
		zones.AvailabilityZones[0].State != ec2types.AvailabilityZoneStateAvailable || aws.ToString(zones.AvailabilityZones[0].RegionName) != "us-east-1" {
		t.Fatalf("zones: %+v, %v", zones, err)
	}
	subnets, err := cl.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{filter("availability-zone", "us-east-1b")}})
	if err != nil || len(subnets.Subnets) != 1 || aws.ToString(subnets.Subnets[0].CidrBlock) != "10.0.2.0/24" ||
		!aws.ToBool(subnets.Subnets[0].DefaultForAz) {
		t.Fatalf("subnets: %+v, %v", subnets, err)
	}
	_, err = cl.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0123456789abcdef0"}})
	wantCode(t, err, "InvalidSubnetID.NotFound", 400)
	vpcs, err := cl.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	if err != nil || len(vpcs.Vpcs) != 1 || aws.ToString(vpcs.Vpcs[0].CidrBlock) != "10.0.0.0/16" || !aws.ToBool(vpcs.Vpcs[0].IsDefault) {
		t.Fatalf("vpcs: %+v, %v", vpcs, err)
	}
}

func TestLoadBalancers(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	ctx := context.Background()
	a, _ := cl.cloud.AddInstance(awsfake.Instance{})
	b, _ := cl.cloud.AddInstance(awsfake.Instance{Zone: "us-east-1b"})
	subnets := cl.cloud.Subnets()
	listeners := []elbtypes.Listener{{Protocol: aws.String("TCP"), LoadBalancerPort: 80, InstanceProtocol: aws.String("TCP"), InstancePort: aws.Int32(30080)}}
	for i := range 7 {
		out, err := cl.elb.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{LoadBalancerName: aws.String(fmt.Sprintf("a%031d", i)),
			Listeners: listeners, Subnets: []string{subnets[0].ID, subnets[1].ID},
			Tags: []elbtypes.Tag{{Key: aws.String("kubernetes.io/service-name"), Value: aws.String(fmt.Sprintf("default/svc-%d", i))}}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(aws.ToString(out.DNSName), ".us-east-1.elb.amazonaws.com") {
			t.Fatalf("DNSName %q", aws.ToString(out.DNSName))
		}
	}
	name := fmt.Sprintf("a%031d", 3)
	_, err := cl.elb.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{LoadBalancerName: aws.String(strings.Repeat("a", 33)),
		Listeners: listeners, Subnets: []string{subnets[0].ID}})
	wantCode(t, err, "ValidationError", 400)
	_, err = cl.elb.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{LoadBalancerName: aws.String(name),
		Listeners: []elbtypes.Listener{{Protocol: aws.String("HTTP"), LoadBalancerPort: 80, InstancePort: aws.Int32(30080)}}, Subnets: []string{subnets[0].ID}})
	var dup *elbtypes.DuplicateAccessPointNameException
	if !errors.As(err, &dup) {
		t.Fatalf("creating %s again, differently: %v; want DuplicateLoadBalancerName", name, err)
	}

	// Pagination with Marker.
	var names []string
	p := elb.NewDescribeLoadBalancersPaginator(cl.elb, &elb.DescribeLoadBalancersInput{PageSize: aws.Int32(3)})
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, d := range out.LoadBalancerDescriptions {
			names = append(names, aws.ToString(d.LoadBalancerName))
		}
	}
	if len(names) != 7 || pages != 3 || !slices.IsSorted(names) {
		t.Fatalf("paginated: %v in %d pages", names, pages)
	}

	reg, err := cl.elb.RegisterInstancesWithLoadBalancer(ctx, &elb.RegisterInstancesWithLoadBalancerInput{LoadBalancerName: aws.String(name),
		Instances: []elbtypes.Instance{{InstanceId: aws.String(a.ID)}, {InstanceId: aws.String(b.ID)}}})
	if err != nil || len(reg.Instances) != 2 {
		t.Fatalf("register: %+v, %v", reg, err)
	}
	_, err = cl.elb.RegisterInstancesWithLoadBalancer(ctx, &elb.RegisterInstancesWithLoadBalancerInput{LoadBalancerName: aws.String(name),
		Instances: []elbtypes.Instance{{InstanceId: aws.String("i-0123456789abcdef0")}}})
	var invalid *elbtypes.InvalidEndPointException
	if !errors.As(err, &invalid) {
		t.Fatalf("registering an unknown instance: %v; want InvalidInstance", err)
	}
	dereg, err := cl.elb.DeregisterInstancesFromLoadBalancer(ctx, &elb.DeregisterInstancesFromLoadBalancerInput{LoadBalancerName: aws.String(name),
		Instances: []elbtypes.Instance{{InstanceId: aws.String(a.ID)}}})
	if err != nil || len(dereg.Instances) != 1 || aws.ToString(dereg.Instances[0].InstanceId) != b.ID {
		t.Fatalf("deregister: %+v, %v", dereg, err)
	}
	hc, err := cl.elb.ConfigureHealthCheck(ctx, &elb.ConfigureHealthCheckInput{LoadBalancerName: aws.String(name),
		HealthCheck: &elbtypes.HealthCheck{Target: aws.String("HTTP:10256/healthz"), Interval: aws.Int32(10), Timeout: aws.Int32(5),
			UnhealthyThreshold: aws.Int32(6), HealthyThreshold: aws.Int32(2)}})
	if err != nil || aws.ToString(hc.HealthCheck.Target) != "HTTP:10256/healthz" || aws.ToInt32(hc.HealthCheck.Interval) != 10 {
		t.Fatalf("health check: %+v, %v", hc, err)
	}
	_, err = cl.elb.ConfigureHealthCheck(ctx, &elb.ConfigureHealthCheckInput{LoadBalancerName: aws.String(name),
		HealthCheck: &elbtypes.HealthCheck{Target: aws.String("TCP:80"), Interval: aws.Int32(5), Timeout: aws.Int32(5),
			UnhealthyThreshold: aws.Int32(2), HealthyThreshold: aws.Int32(2)}})
	wantCode(t, err, "ValidationError", 400)
	if _, err := cl.elb.CreateLoadBalancerListeners(ctx, &elb.CreateLoadBalancerListenersInput{LoadBalancerName: aws.String(name),
		Listeners: []elbtypes.Listener{{Protocol: aws.String("TCP"), LoadBalancerPort: 443, InstancePort: aws.Int32(30443)}}}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.elb.CreateLoadBalancerListeners(ctx, &elb.CreateLoadBalancerListenersInput{LoadBalancerName: aws.String(name),
		Listeners: []elbtypes.Listener{{Protocol: aws.String("TCP"), LoadBalancerPort: 443, InstancePort: aws.Int32(30444)}}})
	wantCode(t, err, "DuplicateListener", 400)
	if _, err := cl.elb.DeleteLoadBalancerListeners(ctx, &elb.DeleteLoadBalancerListenersInput{LoadBalancerName: aws.String(name),
		LoadBalancerPorts: []int32{80}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.elb.AddTags(ctx, &elb.AddTagsInput{LoadBalancerNames: []string{name},
		Tags: []elbtypes.Tag{{Key: aws.String("kubernetes.io/cluster/c1"), Value: aws.String("owned")}}}); err != nil {
		t.Fatal(err)
	}
	tags, err := cl.elb.DescribeTags(ctx, &elb.DescribeTagsInput{LoadBalancerNames: []string{name}})
	if err != nil || len(tags.TagDescriptions) != 1 || len(tags.TagDescriptions[0].Tags) != 2 ||
		aws.ToString(tags.TagDescriptions[0].Tags[1].Value) != "default/svc-3" {
		t.Fatalf("tags: %+v, %v", tags, err)
	}
	if _, err := cl.elb.ModifyLoadBalancerAttributes(ctx, &elb.ModifyLoadBalancerAttributesInput{LoadBalancerName: aws.String(name),
		LoadBalancerAttributes: &elbtypes.LoadBalancerAttributes{CrossZoneLoadBalancing: &elbtypes.CrossZoneLoadBalancing{Enabled: true},
			ConnectionSettings: &elbtypes.ConnectionSettings{IdleTimeout: aws.Int32(120)}}}); err != nil {
		t.Fatal(err)
	}
	attrs, err := cl.elb.DescribeLoadBalancerAttributes(ctx, &elb.DescribeLoadBalancerAttributesInput{LoadBalancerName: aws.String(name)})
	if err != nil || !attrs.LoadBalancerAttributes.CrossZoneLoadBalancing.Enabled ||
		aws.ToInt32(attrs.LoadBalancerAttributes.ConnectionSettings.IdleTimeout) != 120 ||
		aws.ToInt32(attrs.LoadBalancerAttributes.ConnectionDraining.Timeout) != 300 {
		t.Fatalf("attributes: %+v, %v", attrs, err)
	}

	desc, err := cl.elb.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	d := desc.LoadBalancerDescriptions[0]
	if len(d.ListenerDescriptions) != 1 || d.ListenerDescriptions[0].Listener.LoadBalancerPort != 443 ||
		aws.ToInt32(d.ListenerDescriptions[0].Listener.InstancePort) != 30443 || len(d.Instances) != 1 ||
		aws.ToString(d.Instances[0].InstanceId) != b.ID || len(d.AvailabilityZones) != 2 || len(d.Subnets) != 2 ||
		aws.ToString(d.VPCId) != cl.cloud.DefaultVpc().ID || len(d.SecurityGroups) != 1 || aws.ToString(d.Scheme) != "internet-facing" ||
		aws.ToString(d.HealthCheck.Target) != "HTTP:10256/healthz" || d.CreatedTime == nil || aws.ToString(d.DNSName) == "" {
		t.Fatalf("load balancer as the SDK decodes it: %+v", d)
	}

	_, err = cl.elb.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{"missing"}})
	var nf *elbtypes.AccessPointNotFoundException
	if !errors.As(err, &nf) || nf.ErrorCode() != "LoadBalancerNotFound" {
		t.Fatalf("describing a missing load balancer: %v; want LoadBalancerNotFound", err)
	}
	wantCode(t, err, "LoadBalancerNotFound", 400)
	_, err = cl.elb.DescribeTags(ctx, &elb.DescribeTagsInput{LoadBalancerNames: []string{"missing"}})
	wantCode(t, err, "LoadBalancerNotFound", 400)
	_, err = cl.elb.RegisterInstancesWithLoadBalancer(ctx, &elb.RegisterInstancesWithLoadBalancerInput{LoadBalancerName: aws.String("missing"),
		Instances: []elbtypes.Instance{{InstanceId: aws.String(a.ID)}}})
	wantCode(t, err, "LoadBalancerNotFound", 400)

	att, err := cl.elb.AttachLoadBalancerToSubnets(ctx, &elb.AttachLoadBalancerToSubnetsInput{LoadBalancerName: aws.String(name),
		Subnets: []string{subnets[2].ID}})
	if err != nil || len(att.Subnets) != 3 {
		t.Fatalf("attach subnet: %+v, %v", att, err)
	}
	det, err := cl.elb.DetachLoadBalancerFromSubnets(ctx, &elb.DetachLoadBalancerFromSubnetsInput{LoadBalancerName: aws.String(name),
		Subnets: []string{subnets[0].ID}})
	if err != nil || len(det.Subnets) != 2 {
		t.Fatalf("detach subnet: %+v, %v", det, err)
	}
	if got := cl.cloud.LoadBalancers()[3]; !slices.Equal(got.Zones, []string{"us-east-1b", "us-east-1c"}) {
		t.Fatalf("zones after attach and detach: %v", got.Zones)
	}
	// A group a load balancer uses cannot be deleted.
	sg, err := cl.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("lb"), Description: aws.String("lb")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.elb.ApplySecurityGroupsToLoadBalancer(ctx, &elb.ApplySecurityGroupsToLoadBalancerInput{LoadBalancerName: aws.String(name),
		SecurityGroups: []string{aws.ToString(sg.GroupId)}}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: sg.GroupId})
	wantCode(t, err, "DependencyViolation", 400)
	if _, err := cl.elb.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.elb.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerName: aws.String(name)}); err != nil {
		t.Fatalf("deleting again: %v; ELB answers success", err)
	}
	if got := len(cl.cloud.LoadBalancers()); got != 6 {
		t.Fatalf("%d load balancers left, want 6", got)
	}
	if _, err := cl.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: sg.GroupId}); err != nil {
		t.Fatalf("deleting the group once its load balancer is gone: %v", err)
	}
}

func TestSignature(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	ctx := context.Background()
	for _, c := range []struct {
		name, key, secret    string
		ec2Code, elbCode     string
		ec2Status, elbStatus int
	}{
		{"wrong secret", awsfake.DefaultAccessKeyID, "wrong", "AuthFailure", "SignatureDoesNotMatch", 401, 403},
		{"unknown key", "AKIDUNKNOWN", awsfake.DefaultSecretAccessKey, "AuthFailure", "InvalidClientTokenId", 401, 403},
	} {
		bad := ec2.NewFromConfig(sdkConfig(cl.srv, c.key, c.secret, 1))
		_, err := bad.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		wantCode(t, err, c.ec2Code, c.ec2Status)
		badELB := elb.NewFromConfig(sdkConfig(cl.srv, c.key, c.secret, 1))
		_, err = badELB.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{})
		wantCode(t, err, c.elbCode, c.elbStatus)
	}
	// Signed for another region or service.
	other := sdkConfig(cl.srv, awsfake.DefaultAccessKeyID, awsfake.DefaultSecretAccessKey, 1)
	other.Region = "eu-west-1"
	_, err := elb.NewFromConfig(other).DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{})
	wantCode(t, err, "SignatureDoesNotMatch", 403)
	// Unsigned.
	anon := sdkConfig(cl.srv, "", "", 1)
	anon.Credentials = aws.AnonymousCredentials{}
	_, err = elb.NewFromConfig(anon).DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{})
	wantCode(t, err, "MissingAuthenticationToken", 403)
	// A body changed after signing.
	tamper := sdkConfig(cl.srv, awsfake.DefaultAccessKeyID, awsfake.DefaultSecretAccessKey, 1)
	tamper.HTTPClient = tamperingClient{cl.srv.Client()}
	_, err = ec2.NewFromConfig(tamper).DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	wantCode(t, err, "AuthFailure", 401)
	if n := cl.cloud.AuthFailures(); n != 7 {
		t.Fatalf("%d auth failures counted, want 7", n)
	}

	// A clock 20 minutes off.
	skewed := newClients(t, awsfake.Options{Now: func() time.Time { return time.Now().Add(20 * time.Minute) }})
	_, err = skewed.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	wantCode(t, err, "RequestExpired", 400)

	// Another key pair, known to the fake.
	custom := newClients(t, awsfake.Options{AccessKeyID: "AKIDCUSTOM", SecretAccessKey: "custom/secret+key", Region: "eu-central-1"})
	cfg := sdkConfig(custom.srv, "AKIDCUSTOM", "custom/secret+key", 1)
	cfg.Region = "eu-central-1"
	zones, err := ec2.NewFromConfig(cfg).DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil || aws.ToString(zones.AvailabilityZones[0].ZoneName) != "eu-central-1a" {
		t.Fatalf("custom credentials and region: %+v, %v", zones, err)
	}
}

// tamperingClient appends a parameter to the body after the SDK signed it.
type tamperingClient struct{ c *http.Client }

func (t tamperingClient) Do(r *http.Request) (*http.Response, error) {
	body := make([]byte, r.ContentLength)
	if _, err := r.Body.Read(body); err != nil && r.ContentLength > 0 && len(body) == 0 {
		return nil, err
	}
	body = append(body, []byte("&MaxResults=1000")...)
	r.Body = ioNopCloser{strings.NewReader(string(body))}
	r.ContentLength = int64(len(body))
	return t.c.Do(r)
}

type ioNopCloser struct{ *strings.Reader }

func (ioNopCloser) Close() error { return nil }

func TestFaultsAndRequests(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	ctx := context.Background()
	if _, err := cl.cloud.Faults.Add(faultinject.Fault{Route: "ec2:DescribeInstances", FailNext: 1, Status: 503}); err != nil {
		t.Fatal(err)
	}
	_, err := cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	wantCode(t, err, "Unavailable", 503)
	if _, err := cl.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatalf("after the fault: %v", err)
	}

	// The SDK retries throttling on its own.
	retrying := ec2.NewFromConfig(sdkConfig(cl.srv, awsfake.DefaultAccessKeyID, awsfake.DefaultSecretAccessKey, 3))
	if _, err := cl.cloud.Faults.Add(faultinject.Fault{Route: "ec2:DescribeRouteTables", FailNext: 2, Status: 429}); err != nil {
		t.Fatal(err)
	}
	if _, err := retrying.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{}); err != nil {
		t.Fatalf("retried through RequestLimitExceeded: %v", err)
	}
	if _, err := cl.cloud.Faults.Add(faultinject.Fault{Route: "elasticloadbalancing:DescribeLoadBalancers", Always: true, Status: 429}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.elb.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{})
	wantCode(t, err, "Throttling", 429)

	// A write whose answer is lost still happens.
	rt, _ := cl.cloud.AddRouteTable("", nil)
	in, _ := cl.cloud.AddInstance(awsfake.Instance{})
	if _, err := cl.cloud.Faults.Add(faultinject.Fault{Route: "ec2:CreateRoute", FailNext: 1, Status: 500, AfterCommit: true}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.ec2.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String(rt.ID), DestinationCidrBlock: aws.String("10.244.0.0/24"), InstanceId: aws.String(in.ID)})
	wantCode(t, err, "InternalError", 500)
	if got, _ := cl.cloud.RouteTable(rt.ID); len(got.Routes) != 2 {
		t.Fatalf("route after a lost answer: %+v", got.Routes)
	}

	want := map[string]int{"ec2:DescribeInstances": 2, "ec2:DescribeRouteTables": 3, "elasticloadbalancing:DescribeLoadBalancers": 1, "ec2:CreateRoute": 1}
	if got := cl.cloud.Requests(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests %v, want %v", got, want)
	}
}

// TestUnknownAction checks the answer to an action the fake does not
// serve, and to a request with no Version.
func TestUnknownAction(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	_, err := cl.ec2.RunInstances(context.Background(), &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	wantCode(t, err, "InvalidAction", 400)
	resp, err := http.Post(cl.srv.URL, "application/x-www-form-urlencoded", strings.NewReader("Action=DescribeInstances"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("no Version: %d", resp.StatusCode)
	}
}
