package deletion

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
)

// TestGuard walks a budget of one Node in a cluster of ten, with the
// default ceiling of five, through the answers the provider passes it:
// what each answer becomes, whether corroboration was asked for, and
// whether a deferral is reported.
func TestGuard(t *testing.T) {
	b := testBudget(cloudconfig.DeletionBudget{Count: intp(1), Percent: intp(0), Corroborated: cloudconfig.Corroboration{Percent: intp(50)}})
	steps := []struct {
		node string
		// evidence is what corroboration finds missing, "" for none.
		evidence      string
		wantAdmitted  bool
		wantAsked     bool
		wantReported  bool
		wantErrSubstr string
	}{
		{node: "a", wantAdmitted: true},                  // within the budget
		{node: "a", wantAdmitted: true},                  // admitted for its window
		{node: "b", wantAdmitted: true, wantAsked: true}, // corroborated past the budget
		{node: "c", evidence: "no luck", wantAsked: true, wantReported: true, wantErrSubstr: "not corroborated (no luck)"},
		{node: "c", evidence: "no luck", wantAsked: true, wantErrSubstr: "no luck"}, // reported once per window
		{node: "d", wantAdmitted: true, wantAsked: true},
		{node: "e", wantAdmitted: true, wantAsked: true},
		{node: "f", wantAdmitted: true, wantAsked: true},                  // the fifth Node: the ceiling
		{node: "g", wantReported: true, wantErrSubstr: "ceiling reached"}, // past the ceiling, nothing asked
	}
	for i, s := range steps {
		asked := false
		event, err := b.Guard(s.node, func() int { return 10 }, func() string { asked = true; return s.evidence })
		if (err == nil) != s.wantAdmitted || asked != s.wantAsked || (event != "") != s.wantReported {
			t.Fatalf("step %d (%s): err %v, corroboration asked %v, event %q", i, s.node, err, asked, event)
		}
		if err != nil && (!errors.Is(err, ErrDeferred) || !strings.Contains(err.Error(), s.wantErrSubstr)) {
			t.Fatalf("step %d (%s): %v, want ErrDeferred naming %q", i, s.node, err, s.wantErrSubstr)
		}
	}
}

func readyNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
}

// TestProbeTargets: only Ready, initialized Nodes other than the one in
// question are asked about, ProbeNodes at most, rotating.
func TestProbeTargets(t *testing.T) {
	notReady := readyNode("not-ready")
	notReady.Status.Conditions[0].Status = v1.ConditionFalse
	uninitialized := readyNode("uninitialized")
	uninitialized.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider}}
	deleting := readyNode("deleting")
	deleting.DeletionTimestamp = &metav1.Time{}
	nodes := []*v1.Node{readyNode("r0"), notReady, readyNode("asked"), uninitialized, deleting, readyNode("r1"), readyNode("r2"), readyNode("r3")}
	cases := []struct {
		nodes []*v1.Node
		next  int
		want  string
	}{
		{nodes, 0, "[r0 r1 r2]"},
		{nodes, 1, "[r1 r2 r3]"},
		{nodes, 3, "[r3 r0 r1]"},
		{nodes[:3], 0, "[r0]"},
		{nodes[1:5], 0, "[]"},
	}
	for _, tc := range cases {
		var names []string
		for _, n := range probeTargets(tc.nodes, "asked", tc.next) {
			names = append(names, n.Name)
		}
		if got := fmt.Sprint(names); got != tc.want {
			t.Errorf("probeTargets(next %d) = %s, want %s", tc.next, got, tc.want)
		}
	}
}

// TestControlProbeVerdict: the verdicts a probe reaches, and that a
// verdict is reused for the same module and not for another.
func TestControlProbeVerdict(t *testing.T) {
	nodes := []*v1.Node{readyNode("r0"), readyNode("r1")}
	present := func(*v1.Node) (bool, error) { return false, nil }
	cases := []struct {
		name  string
		nodes []*v1.Node
		ask   Ask
		want  string
	}{
		{"every Ready Node present", nodes, present, ""},
		{"no Ready Node", nil, present, "there is no Ready Node"},
		{"a Ready Node gone", nodes, func(n *v1.Node) (bool, error) { return n.Name == "r1", nil }, "Ready Node r1's instance is gone too"},
		{"no answer", nodes, func(*v1.Node) (bool, error) { return false, errors.New("trap") }, "could not answer whether Ready Node r0's instance exists: trap"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p ControlProbe
			got := p.Verdict("module", tc.nodes, "asked", tc.ask)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("verdict %q, want %q", got, tc.want)
			}
		})
	}

	var p ControlProbe
	calls := 0
	counting := func(*v1.Node) (bool, error) { calls++; return false, nil }
	p.Verdict("module", nodes, "asked", counting)
	p.Verdict("module", nodes, "asked", counting)
	if calls != len(nodes) {
		t.Fatalf("%d questions for two verdicts on one module, want %d", calls, len(nodes))
	}
	p.Verdict("another module", nodes, "asked", counting)
	if calls != 2*len(nodes) {
		t.Fatalf("another module was not probed afresh")
	}
}
