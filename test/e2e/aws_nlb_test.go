package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/faultinject"
	"github.com/wasmccm/wasmccm/modules/aws"
)

// testNLB: a Service annotated for an NLB gets one through the upstream
// service controller, with faults injected into its creation, its update
// (a port added, a node port changed) and its deletion; what it made is
// finished by the retries without duplicates, and deleted with the
// Service, nothing left, while another NLB Service's stays untouched.
func (e *awsEnv) testNLB(t *testing.T) {
	ctx := context.Background()
	in := e.addInstanceAndNode("10.244.20.0/24")
	e.waitInitialized(t, in.PrivateDNSName)
	keep := e.createNLBService(t, "nlb-keep")
	for _, f := range []faultinject.Fault{
		{Route: "elbv2:CreateListener", FailNext: 2, Status: 500},
		{Route: "elbv2:RegisterTargets", FailNext: 1, Status: 503},
		{Route: "elbv2:CreateTargetGroup", FailNext: 1, Status: 500, AfterCommit: true},
		{Route: "elbv2:DescribeTargetGroups", FailNext: 1, Status: 429, RetryAfter: 1},
	} {
		if _, err := e.fake.Faults.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	svc := e.createNLBService(t, "nlb-web")
	name := lbName(svc)
	eventually(t, 90*time.Second, "NLB hostname on the Service", func() (bool, error) {
		s, err := e.getService("nlb-web")
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		lb, ok := e.nlb(name)
		return ok && s.Status.LoadBalancer.Ingress[0].Hostname == lb.DNSName, nil
	})
	e.fake.Faults.Clear()
	e.waitNLB(t, svc)

	// A port added, with a lost CreateTargetGroup answer: one group for
	// it all the same.
	if _, err := e.fake.Faults.Add(faultinject.Fault{Route: "elbv2:CreateTargetGroup", FailNext: 1, Status: 500, AfterCommit: true}); err != nil {
		t.Fatal(err)
	}
	svc = e.updateService(t, "nlb-web", func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: v1.ProtocolTCP})
	})
	e.waitNLB(t, svc)
	// A node port changed, with ModifyListener failing once: the old
	// group goes, the new one serves.
	if _, err := e.fake.Faults.Add(faultinject.Fault{Route: "elbv2:ModifyListener", FailNext: 1, Status: 503}); err != nil {
		t.Fatal(err)
	}
	svc = e.updateService(t, "nlb-web", func(s *v1.Service) { s.Spec.Ports[0].NodePort = 31080 })
	e.waitNLB(t, svc)

	// Deletion with target groups unreadable deletes nothing; with
	// DeleteLoadBalancer's answer lost, it is finished.
	if _, err := e.fake.Faults.Add(faultinject.Fault{Name: "tg-unreadable", Route: "elbv2:DescribeTargetGroups", Always: true, Status: 503}); err != nil {
		t.Fatal(err)
	}
	asked := e.fake.Requests()["elbv2:DescribeTargetGroups"]
	if err := e.client.CoreV1().Services("default").Delete(ctx, "nlb-web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The deletion must have been tried under the fault, or the check
	// below proves nothing.
	eventually(t, 30*time.Second, "the deletion tried while target groups are unreadable", func() (bool, error) {
		return e.fake.Requests()["elbv2:DescribeTargetGroups"] > asked, nil
	})
	if _, ok := e.nlb(name); !ok || len(e.targetGroupsOf(svc)) != 2 {
		t.Fatal("deleted on doubt: DescribeTargetGroups failed, yet the NLB or its groups went")
	}
	e.fake.Faults.Remove("tg-unreadable")
	if _, err := e.fake.Faults.Add(faultinject.Fault{Route: "elbv2:DeleteLoadBalancer", FailNext: 1, Status: 500, AfterCommit: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "Service, NLB, groups and rules gone", func() (bool, error) {
		_, err := e.getService("nlb-web")
		_, lbLeft := e.nlb(name)
		return apierrors.IsNotFound(err) && !lbLeft && len(e.targetGroupsOf(svc)) == 0 && len(e.nlbRules(name)) == 0, err
	})
	e.fake.Faults.Clear()
	// The other Service's NLB is whole.
	e.waitNLB(t, keep)
	if err := e.client.CoreV1().Services("default").Delete(ctx, "nlb-keep", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the other NLB gone with its Service", func() (bool, error) {
		_, lbLeft := e.nlb(lbName(keep))
		return !lbLeft && len(e.targetGroupsOf(keep)) == 0 && len(e.nlbRules(lbName(keep))) == 0, nil
	})
}

func (e *awsEnv) createNLBService(t *testing.T, name string) *v1.Service {
	t.Helper()
	svc, err := e.client.CoreV1().Services("default").Create(context.Background(), &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Annotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func (e *awsEnv) updateService(t *testing.T, name string, change func(*v1.Service)) *v1.Service {
	t.Helper()
	var out *v1.Service
	eventually(t, 30*time.Second, "Service "+name+" updated", func() (bool, error) {
		s, err := e.getService(name)
		if err != nil {
			return false, err
		}
		change(s)
		out, err = e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{})
		return err == nil, err
	})
	return out
}

func (e *awsEnv) nlb(name string) (awsfake.NetworkLoadBalancer, bool) {
	for _, lb := range e.fake.NetworkLoadBalancers() {
		if lb.Name == name {
			return lb, true
		}
	}
	return awsfake.NetworkLoadBalancer{}, false
}

// targetGroupsOf are the target groups tagged with the Service's UID.
func (e *awsEnv) targetGroupsOf(svc *v1.Service) []awsfake.TargetGroup {
	var out []awsfake.TargetGroup
	for _, tg := range e.fake.TargetGroups() {
		if tg.Tags[aws.ServiceUIDTag] == string(svc.UID) {
			out = append(out, tg)
		}
	}
	return out
}

// nlbRules are the client and health rules of any group for the NLB.
func (e *awsEnv) nlbRules(name string) []awsfake.Permission {
	var out []awsfake.Permission
	for _, sg := range e.fake.SecurityGroups() {
		for _, p := range sg.Ingress {
			if strings.HasPrefix(p.Description, "kubernetes.io/rule/nlb/") && strings.HasSuffix(p.Description, "="+name) {
				out = append(out, p)
			}
		}
	}
	return out
}

// waitNLB waits until the Service's NLB has a listener per port
// forwarding to a group of the Nodes' instances on its node port, no
// other group tagged for it, and a client rule per node port.
func (e *awsEnv) waitNLB(t *testing.T, svc *v1.Service) {
	t.Helper()
	name := lbName(svc)
	eventually(t, 90*time.Second, "NLB "+name+" in step with its Service", func() (bool, error) {
		s, err := e.getService(svc.Name)
		if err != nil {
			return false, err
		}
		lb, ok := e.nlb(name)
		if !ok {
			return false, nil
		}
		groups := map[string]awsfake.TargetGroup{}
		for _, tg := range e.targetGroupsOf(s) {
			groups[tg.ARN] = tg
		}
		listeners := map[int]awsfake.TargetGroup{}
		for _, l := range e.fake.NetworkListeners() {
			if l.LoadBalancerARN == lb.ARN {
				listeners[l.Port] = groups[l.TargetGroupARN]
			}
		}
		if len(listeners) != len(s.Spec.Ports) || len(groups) != len(s.Spec.Ports) {
			return false, nil
		}
		want := e.nodeInstanceIDs()
		var clientPorts []int
		for _, r := range e.nlbRules(name) {
			if strings.HasPrefix(r.Description, "kubernetes.io/rule/nlb/client=") {
				clientPorts = append(clientPorts, r.FromPort)
			}
		}
		for _, p := range s.Spec.Ports {
			tg := listeners[int(p.Port)]
			var targets []string
			for _, tt := range tg.Targets {
				if tt.Port == int(p.NodePort) {
					targets = append(targets, tt.ID)
				}
			}
			slices.Sort(targets)
			if tg.Port != int(p.NodePort) || !slices.Equal(targets, want) || !slices.Contains(clientPorts, int(p.NodePort)) {
				return false, nil
			}
		}
		return len(clientPorts) == len(s.Spec.Ports), nil
	})
}
