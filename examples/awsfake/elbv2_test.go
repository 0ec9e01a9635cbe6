package awsfake_test

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	v2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/faultinject"
)

func v2Client(cl clients) *elbv2.Client {
	return elbv2.NewFromConfig(sdkConfig(cl.srv, awsfake.DefaultAccessKeyID, awsfake.DefaultSecretAccessKey, 1))
}

// TestNetworkLoadBalancers walks an NLB's life as a cloud controller
// drives it, with the official ELBv2 client: the load balancer, a target
// group of instances, a listener forwarding to it, a second group swapped
// in, tags and attributes, and deletion in the order AWS allows.
func TestNetworkLoadBalancers(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	v2 := v2Client(cl)
	ctx := context.Background()
	subnets := cl.cloud.Subnets()
	vpc := cl.cloud.DefaultVpc().ID
	a, _ := cl.cloud.AddInstance(awsfake.Instance{})
	b, _ := cl.cloud.AddInstance(awsfake.Instance{Zone: awsfake.DefaultRegion + "b"})

	_, err := v2.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{"nlb"}})
	wantCode(t, err, "LoadBalancerNotFound", 400)
	create := &elbv2.CreateLoadBalancerInput{Name: aws.String("nlb"), Type: v2types.LoadBalancerTypeEnumNetwork,
		Scheme:         v2types.LoadBalancerSchemeEnumInternal,
		SubnetMappings: []v2types.SubnetMapping{{SubnetId: aws.String(subnets[0].ID)}, {SubnetId: aws.String(subnets[1].ID)}},
		Tags:           []v2types.Tag{{Key: aws.String("kubernetes.io/service-name"), Value: aws.String("default/web")}}}
	out, err := v2.CreateLoadBalancer(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	lb := out.LoadBalancers[0]
	if aws.ToString(lb.VpcId) != vpc || lb.Type != v2types.LoadBalancerTypeEnumNetwork || lb.Scheme != v2types.LoadBalancerSchemeEnumInternal ||
		len(lb.AvailabilityZones) != 2 || aws.ToString(lb.AvailabilityZones[1].SubnetId) != subnets[1].ID || aws.ToString(lb.DNSName) == "" ||
		lb.State == nil || lb.State.Code != v2types.LoadBalancerStateEnumActive {
		t.Fatalf("created %+v", lb)
	}
	again, err := v2.CreateLoadBalancer(ctx, create)
	if err != nil || aws.ToString(again.LoadBalancers[0].LoadBalancerArn) != aws.ToString(lb.LoadBalancerArn) {
		t.Fatalf("creating again with the same settings: %v", err)
	}
	create.Scheme = v2types.LoadBalancerSchemeEnumInternetFacing
	_, err = v2.CreateLoadBalancer(ctx, create)
	wantCode(t, err, "DuplicateLoadBalancerName", 400)

	tgIn := &elbv2.CreateTargetGroupInput{Name: aws.String("k8s-default-web-0123456789"), Protocol: v2types.ProtocolEnumTcp,
		Port: aws.Int32(30080), VpcId: aws.String(vpc), TargetType: v2types.TargetTypeEnumInstance,
		HealthCheckProtocol: v2types.ProtocolEnumHttp, HealthCheckPort: aws.String("10256"), HealthCheckPath: aws.String("/healthz"),
		HealthCheckIntervalSeconds: aws.Int32(10), HealthyThresholdCount: aws.Int32(2), UnhealthyThresholdCount: aws.Int32(2),
		Tags: []v2types.Tag{{Key: aws.String("owner"), Value: aws.String("test")}}}
	tgOut, err := v2.CreateTargetGroup(ctx, tgIn)
	if err != nil {
		t.Fatal(err)
	}
	tg := tgOut.TargetGroups[0]
	if aws.ToString(tg.HealthCheckPath) != "/healthz" || aws.ToInt32(tg.HealthCheckIntervalSeconds) != 10 || aws.ToInt32(tg.HealthCheckTimeoutSeconds) != 10 ||
		tg.TargetType != v2types.TargetTypeEnumInstance || len(tg.LoadBalancerArns) != 0 {
		t.Fatalf("target group %+v", tg)
	}
	tgIn.Port = aws.Int32(30081)
	_, err = v2.CreateTargetGroup(ctx, tgIn)
	wantCode(t, err, "DuplicateTargetGroupName", 400)

	_, err = v2.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tg.TargetGroupArn,
		Targets: []v2types.TargetDescription{{Id: aws.String(a.ID), Port: aws.Int32(30080)}, {Id: aws.String(b.ID), Port: aws.Int32(30080)}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v2.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tg.TargetGroupArn,
		Targets: []v2types.TargetDescription{{Id: aws.String("i-0123456789abcdef0")}}})
	wantCode(t, err, "InvalidTarget", 400)
	health, err := v2.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: tg.TargetGroupArn})
	if err != nil || len(health.TargetHealthDescriptions) != 2 || health.TargetHealthDescriptions[0].TargetHealth.State != v2types.TargetHealthStateEnumUnused ||
		aws.ToString(health.TargetHealthDescriptions[0].Target.Id) != a.ID || aws.ToInt32(health.TargetHealthDescriptions[0].Target.Port) != 30080 {
		t.Fatalf("health before a listener: %+v, %v", health, err)
	}

	lOut, err := v2.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Port: aws.Int32(80), Protocol: v2types.ProtocolEnumTcp,
		DefaultActions: []v2types.Action{{Type: v2types.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroupArn}}})
	if err != nil {
		t.Fatal(err)
	}
	listener := lOut.Listeners[0]
	_, err = v2.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Port: aws.Int32(80), Protocol: v2types.ProtocolEnumTcp,
		DefaultActions: []v2types.Action{{Type: v2types.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroupArn}}})
	wantCode(t, err, "DuplicateListener", 400)
	health, _ = v2.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: tg.TargetGroupArn})
	if health.TargetHealthDescriptions[0].TargetHealth.State != v2types.TargetHealthStateEnumHealthy || aws.ToString(health.TargetHealthDescriptions[0].HealthCheckPort) != "10256" {
		t.Fatalf("health behind a listener: %+v", health.TargetHealthDescriptions[0])
	}
	byLB, err := v2.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil || len(byLB.TargetGroups) != 1 || !slices.Equal(byLB.TargetGroups[0].LoadBalancerArns, []string{aws.ToString(lb.LoadBalancerArn)}) {
		t.Fatalf("groups of the load balancer: %+v, %v", byLB, err)
	}

	// A second group replaces the first behind the listener; the first,
	// in use until then, may be deleted after.
	tgIn.Name, tgIn.Port = aws.String("k8s-default-web-abcdef0123"), aws.Int32(30081)
	tg2Out, err := v2.CreateTargetGroup(ctx, tgIn)
	if err != nil {
		t.Fatal(err)
	}
	tg2 := tg2Out.TargetGroups[0]
	_, err = v2.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tg.TargetGroupArn})
	wantCode(t, err, "ResourceInUse", 400)
	if _, err := v2.ModifyListener(ctx, &elbv2.ModifyListenerInput{ListenerArn: listener.ListenerArn,
		DefaultActions: []v2types.Action{{Type: v2types.ActionTypeEnumForward, TargetGroupArn: tg2.TargetGroupArn}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tg.TargetGroupArn}); err != nil {
		t.Fatal(err)
	}
	ls, err := v2.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil || len(ls.Listeners) != 1 || aws.ToString(ls.Listeners[0].DefaultActions[0].TargetGroupArn) != aws.ToString(tg2.TargetGroupArn) ||
		aws.ToInt32(ls.Listeners[0].Port) != 80 {
		t.Fatalf("listeners %+v, %v", ls, err)
	}
	mod, err := v2.ModifyTargetGroup(ctx, &elbv2.ModifyTargetGroupInput{TargetGroupArn: tg2.TargetGroupArn, HealthCheckPort: aws.String("traffic-port"),
		HealthyThresholdCount: aws.Int32(3)})
	if err != nil || aws.ToString(mod.TargetGroups[0].HealthCheckPort) != "traffic-port" || aws.ToInt32(mod.TargetGroups[0].HealthyThresholdCount) != 3 {
		t.Fatalf("modified %+v, %v", mod, err)
	}

	// Tags and attributes.
	if _, err := v2.AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: []string{aws.ToString(lb.LoadBalancerArn), aws.ToString(tg2.TargetGroupArn)},
		Tags: []v2types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); err != nil {
		t.Fatal(err)
	}
	tags, err := v2.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{aws.ToString(lb.LoadBalancerArn), aws.ToString(tg2.TargetGroupArn)}})
	if err != nil || len(tags.TagDescriptions) != 2 || len(tags.TagDescriptions[0].Tags) != 2 || len(tags.TagDescriptions[1].Tags) != 2 {
		t.Fatalf("tags %+v, %v", tags, err)
	}
	if _, err := v2.ModifyLoadBalancerAttributes(ctx, &elbv2.ModifyLoadBalancerAttributesInput{LoadBalancerArn: lb.LoadBalancerArn,
		Attributes: []v2types.LoadBalancerAttribute{{Key: aws.String("load_balancing.cross_zone.enabled"), Value: aws.String("true")}}}); err != nil {
		t.Fatal(err)
	}
	attrs, err := v2.DescribeLoadBalancerAttributes(ctx, &elbv2.DescribeLoadBalancerAttributesInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil || !slices.ContainsFunc(attrs.Attributes, func(a v2types.LoadBalancerAttribute) bool {
		return aws.ToString(a.Key) == "load_balancing.cross_zone.enabled" && aws.ToString(a.Value) == "true"
	}) {
		t.Fatalf("attributes %+v, %v", attrs, err)
	}
	_, err = v2.ModifyLoadBalancerAttributes(ctx, &elbv2.ModifyLoadBalancerAttributesInput{LoadBalancerArn: lb.LoadBalancerArn,
		Attributes: []v2types.LoadBalancerAttribute{{Key: aws.String("access_logs.s3.enabled"), Value: aws.String("true")}}})
	wantCode(t, err, "InvalidConfigurationRequest", 400)

	if _, err := v2.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: tg2.TargetGroupArn,
		Targets: []v2types.TargetDescription{{Id: aws.String(a.ID), Port: aws.Int32(30081)}}}); err == nil {
		t.Fatal("deregistering a target never registered succeeded")
	}

	// Deleting the load balancer takes its listeners; its groups stay.
	if _, err := v2.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn}); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn}); err != nil {
		t.Fatalf("deleting again: %v", err)
	}
	if len(cl.cloud.NetworkListeners()) != 0 || len(cl.cloud.TargetGroups()) != 1 {
		t.Fatalf("after the delete: listeners %+v, groups %+v", cl.cloud.NetworkListeners(), cl.cloud.TargetGroups())
	}
	if _, err := v2.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tg2.TargetGroupArn}); err != nil {
		t.Fatal(err)
	}
	_, err = v2.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{LoadBalancerArns: []string{aws.ToString(lb.LoadBalancerArn)}})
	wantCode(t, err, "LoadBalancerNotFound", 400)
}

// TestNetworkLoadBalancerPagesAndFaults pages listings with the SDK's
// paginators, and fails a request by its route.
func TestNetworkLoadBalancerPagesAndFaults(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	v2 := v2Client(cl)
	ctx := context.Background()
	vpc := cl.cloud.DefaultVpc().ID
	var want []string
	for i := range 7 {
		name := "tg-" + string(rune('a'+i))
		if _, err := v2.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String(name), Protocol: v2types.ProtocolEnumTcp,
			Port: aws.Int32(30000 + int32(i)), VpcId: aws.String(vpc)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	var got []string
	pages := 0
	p := elbv2.NewDescribeTargetGroupsPaginator(v2, &elbv2.DescribeTargetGroupsInput{PageSize: aws.Int32(3)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, tg := range out.TargetGroups {
			got = append(got, aws.ToString(tg.TargetGroupName))
		}
	}
	slices.Sort(got)
	if pages != 3 || !slices.Equal(got, want) {
		t.Fatalf("%d pages of %v", pages, got)
	}
	if _, err := cl.cloud.Faults.Add(faultinject.Fault{Route: "elbv2:DescribeTargetGroups", FailNext: 1, Status: 429}); err != nil {
		t.Fatal(err)
	}
	_, err := v2.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{})
	wantCode(t, err, "Throttling", 429)
	if n := cl.cloud.Requests()["elbv2:DescribeTargetGroups"]; n != 4 {
		t.Fatalf("%d DescribeTargetGroups requests, want 4", n)
	}
}

// TestRuleDescriptions checks that a rule's description, by which the
// official CCM finds its NLB rules, is kept and described.
func TestRuleDescriptions(t *testing.T) {
	cl := newClients(t, awsfake.Options{})
	ctx := context.Background()
	sg := cl.cloud.SecurityGroups()[0].ID
	rule := ec2types.IpPermission{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(30080), ToPort: aws.Int32(30080),
		IpRanges: []ec2types.IpRange{{CidrIp: aws.String("0.0.0.0/0"), Description: aws.String("kubernetes.io/rule/nlb/client=a1")}}}
	if _, err := cl.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(sg),
		IpPermissions: []ec2types.IpPermission{rule}}); err != nil {
		t.Fatal(err)
	}
	out, err := cl.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{sg}})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range out.SecurityGroups[0].IpPermissions {
		for _, r := range p.IpRanges {
			found = found || aws.ToString(r.Description) == "kubernetes.io/rule/nlb/client=a1"
		}
	}
	if !found {
		t.Fatalf("no described rule: %+v", out.SecurityGroups[0].IpPermissions)
	}
	// EC2 revokes a rule without its description.
	rule.IpRanges[0].Description = nil
	if _, err := cl.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(sg),
		IpPermissions: []ec2types.IpPermission{rule}}); err != nil {
		t.Fatal(err)
	}
}
