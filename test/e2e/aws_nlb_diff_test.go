package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/modules/aws"
)

// TestAWSNLBDifferential is TestAWSDifferential for Network Load
// Balancers: the same NLB Services under wasmccm with the aws module and
// under the official aws-cloud-controller-manager named by
// WASMCCM_AWS_CCM, each against a fresh fake; the objects each made, the
// same after a change of ports, what each left after a deletion, and the
// requests each made, as a Markdown table. Skipped unless the variable is
// set.
func TestAWSNLBDifferential(t *testing.T) {
	differential(t, "WASMCCM_AWS_CCM", "wasmccm + aws module", awsNLBDiffRun)
}

const nlbAnnotation = "service.beta.kubernetes.io/aws-load-balancer-type"

// awsNLBDiffRun plays the scenario under one implementation: two Nodes in
// two zones; three NLB Services (two ports; internal with cross-zone,
// tags, a source range and an HTTP health check; externalTrafficPolicy
// Local); then the first loses a port and changes the other's node port;
// then it is deleted.
func awsNLBDiffRun(t *testing.T, impl, official string) map[string]string {
	e, _, _ := awsDiffCluster(t, impl, official)
	fake := e.fake
	ctx := context.Background()
	web := diffService("nlb", 80, 30080, map[string]string{nlbAnnotation: "nlb"})
	web.Spec.Ports = append(web.Spec.Ports, v1.ServicePort{Name: "q", Port: 443, NodePort: 30443, TargetPort: intstr.FromInt32(8443), Protocol: v1.ProtocolTCP})
	internal := diffService("nlb-internal", 8443, 30444, map[string]string{nlbAnnotation: "nlb",
		"service.beta.kubernetes.io/aws-load-balancer-internal":                          "true",
		"service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled": "true",
		"service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags":          "team=web",
		"service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol":              "HTTP",
		"service.beta.kubernetes.io/aws-load-balancer-healthcheck-path":                  "/ready",
		"service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval":              "10",
	})
	internal.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
	local := diffService("nlb-local", 8080, 30880, map[string]string{nlbAnnotation: "nlb"})
	local.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	services := []*v1.Service{web, internal, local}
	for _, svc := range services {
		if _, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ingress := map[string][]v1.LoadBalancerIngress{}
	healthPort := strings.NewReplacer()
	for _, svc := range services {
		eventually(t, 90*time.Second, "ingress of "+svc.Name, func() (bool, error) {
			s, err := e.getService(svc.Name)
			if err != nil {
				return false, err
			}
			ingress[svc.Name] = s.Status.LoadBalancer.Ingress
			if p := s.Spec.HealthCheckNodePort; p != 0 {
				healthPort = strings.NewReplacer(fmt.Sprintf("%q", fmt.Sprint(p)), `"<healthCheckNodePort>"`,
					fmt.Sprintf(`"FromPort":%d,"ToPort":%d`, p, p), `"FromPort":"<healthCheckNodePort>","ToPort":"<healthCheckNodePort>"`)
			}
			return len(s.Status.LoadBalancer.Ingress) > 0, nil
		})
	}
	time.Sleep(5 * time.Second) // a second sync must change nothing

	out := map[string]string{}
	symbolic := nlbSymbols(fake)
	for name, in := range ingress {
		out["service "+name+" ingress"] = symbolic.Replace(compact(in))
	}
	nlbOutcome(out, "", fake, symbolic, healthPort)

	// The first Service loses port 443, and 80 moves to node port 30081.
	e.updateService(t, "nlb", func(s *v1.Service) {
		s.Spec.Ports = s.Spec.Ports[:1]
		s.Spec.Ports[0].NodePort = 30081
	})
	webName := ""
	for _, lb := range fake.NetworkLoadBalancers() {
		if lb.Tags["kubernetes.io/service-name"] == "default/nlb" {
			webName = lb.Name
		}
	}
	eventually(t, 90*time.Second, "the NLB of nlb following its ports", func() (bool, error) {
		lb, ok := e.nlb(webName)
		if !ok {
			return false, nil
		}
		var ports []int
		for _, l := range fake.NetworkListeners() {
			if l.LoadBalancerARN == lb.ARN {
				ports = append(ports, l.Port)
				for _, tg := range fake.TargetGroups() {
					if tg.ARN == l.TargetGroupARN && tg.Port != 30081 {
						return false, nil
					}
				}
			}
		}
		return slices.Equal(ports, []int{80}), nil
	})
	time.Sleep(5 * time.Second)
	symbolic = nlbSymbols(fake)
	nlbOutcome(out, "after the port change: ", fake, symbolic, healthPort)

	if err := e.client.CoreV1().Services("default").Delete(ctx, "nlb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "Service nlb deleted", func() (bool, error) {
		_, err := e.getService("nlb")
		return apierrors.IsNotFound(err), nil
	})
	time.Sleep(5 * time.Second)
	p := "after deleting nlb: "
	out[p+"load balancers"] = fmt.Sprint(len(fake.NetworkLoadBalancers()))
	var groups, rules []string
	for _, tg := range fake.TargetGroups() {
		groups = append(groups, tg.Name)
	}
	out[p+"target groups"] = strings.Join(groups, ",")
	for _, sg := range fake.SecurityGroups() {
		for _, r := range sg.Ingress {
			if strings.HasSuffix(r.Description, "="+webName) {
				rules = append(rules, healthPort.Replace(symbolic.Replace(compact(r))))
			}
		}
	}
	slices.Sort(rules)
	out[p+"rules of its NLB"] = strings.Join(rules, " ")
	awsRequestOutcome(out, fake)
	return out
}

// nlbOutcome records, under prefix, the NLBs, their listeners and target
// groups, and every security group's rules, by the Service they serve.
func nlbOutcome(out map[string]string, prefix string, fake *awsfake.Cloud, symbolic, healthPort *strings.Replacer) {
	groups := map[string]awsfake.TargetGroup{}
	for _, tg := range fake.TargetGroups() {
		groups[tg.ARN] = tg
	}
	for _, lb := range fake.NetworkLoadBalancers() {
		p := prefix + "NLB of " + lb.Tags["kubernetes.io/service-name"] + " "
		out[p+"scheme"] = lb.Scheme
		out[p+"subnets"] = strings.Join(lb.Subnets, ",")
		out[p+"security groups"] = strings.Join(lb.SecurityGroups, ",")
		out[p+"tags"] = symbolic.Replace(compact(lb.Tags))
		out[p+"attributes"] = compact(lb.Attributes)
		for _, l := range fake.NetworkListeners() {
			if l.LoadBalancerARN != lb.ARN {
				continue
			}
			lp := fmt.Sprintf("%slistener %s:%d ", p, l.Protocol, l.Port)
			tg := groups[l.TargetGroupARN]
			out[lp+"tags"] = symbolic.Replace(compact(l.Tags))
			out[lp+"target group"] = fmt.Sprintf("%s %s:%d %s", tg.Name, tg.Protocol, tg.Port, tg.TargetType)
			out[lp+"health check"] = healthPort.Replace(compact(tg.HealthCheck))
			targets := slices.Clone(tg.Targets)
			slices.SortFunc(targets, func(a, b awsfake.Target) int { return strings.Compare(a.ID, b.ID) })
			out[lp+"targets"] = compact(targets)
			out[lp+"group tags"] = symbolic.Replace(compact(tg.Tags))
		}
	}
	out[prefix+"target groups in all"] = fmt.Sprint(len(groups))
	for _, sg := range fake.SecurityGroups() {
		var rules []string
		for _, r := range sg.Ingress {
			rules = append(rules, healthPort.Replace(symbolic.Replace(compact(r))))
		}
		slices.Sort(rules)
		out[prefix+"group "+sg.Name+" ingress"] = strings.Join(rules, " ")
	}
}

// nlbSymbols names NLBs, their DNS names and Service UIDs after the
// Service they serve.
func nlbSymbols(fake *awsfake.Cloud) *strings.Replacer {
	var pairs []string
	for _, lb := range fake.NetworkLoadBalancers() {
		svc := "<" + lb.Tags["kubernetes.io/service-name"] + ">"
		pairs = append(pairs, lb.DNSName, "<dns of "+svc+">", lb.Name, svc)
		if uid := lb.Tags[aws.ServiceUIDTag]; uid != "" {
			pairs = append(pairs, uid, "<UID of "+svc+">")
		}
	}
	return strings.NewReplacer(pairs...)
}
