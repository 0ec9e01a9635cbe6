package decision

import (
	"errors"
	"fmt"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host"
)

func TestCompareAnswers(t *testing.T) {
	yes, no := abi.Bool(true), abi.Bool(false)
	boolean := func(b abi.Bool) Answer { return Answer{Out: &b} }
	str := func(s string) Answer { v := abi.String(s); return Answer{Out: &v} }
	lb := func(exists bool) Answer { return Answer{Out: &abi.GetLoadBalancerResult{Exists: exists}} }
	meta := func(label string) Answer {
		return Answer{Out: &abi.InstanceMetadata{ProviderID: "sim://1", AdditionalLabels: map[string]string{"gen": label}}}
	}
	notFound := Answer{Err: &host.StatusError{Export: "x", Outcome: abi.Outcome{Status: abi.StatusNotFound}}}
	cloudError := Answer{Err: &host.StatusError{Export: "x", Outcome: abi.Outcome{Status: abi.StatusError, Message: "503"}}}
	trap := Answer{Err: &host.FailureError{Export: "x", Reason: host.ReasonTrap, Err: errors.New("panic")}}

	cases := []struct {
		name                 string
		export               string
		inService, candidate Answer
		want                 Verdict
	}{
		{"exists agrees", abi.ExportInstanceExists, boolean(yes), boolean(yes), Agree},
		{"gone agrees", abi.ExportInstanceExists, boolean(no), boolean(no), Agree},
		{"exists -> gone", abi.ExportInstanceExists, boolean(yes), boolean(no), Destructive},
		{"gone -> exists", abi.ExportInstanceExists, boolean(no), boolean(yes), Benign},
		{"legacy exists -> gone", abi.ExportInstanceExistsByProviderID, boolean(yes), boolean(no), Destructive},
		{"running -> shut down", abi.ExportInstanceShutdown, boolean(no), boolean(yes), Destructive},
		{"shut down -> running", abi.ExportInstanceShutdownByProviderID, boolean(yes), boolean(no), Benign},
		{"exists -> NotFound status is a failure, not gone", abi.ExportInstanceExists, boolean(yes), notFound, CandidateFailed},
		{"instance ID -> not found", abi.ExportInstanceID, str("i-1"), notFound, Destructive},
		{"metadata -> not found", abi.ExportInstanceMetadata, meta("1"), notFound, Destructive},
		{"metadata label change", abi.ExportInstanceMetadata, meta("1"), meta("2"), Benign},
		{"metadata equal", abi.ExportInstanceMetadata, meta("1"), meta("1"), Agree},
		{"load balancer -> gone", abi.ExportGetLoadBalancer, lb(true), lb(false), Destructive},
		{"load balancer appears", abi.ExportGetLoadBalancer, lb(false), lb(true), Benign},
		{"candidate traps", abi.ExportInstanceExists, boolean(yes), trap, CandidateFailed},
		{"candidate cloud error", abi.ExportGetZoneByNodeName, str("z"), cloudError, CandidateFailed},
		{"in service fails", abi.ExportInstanceExists, trap, boolean(no), InServiceFailed},
		{"both fail", abi.ExportInstanceExists, trap, cloudError, Agree},
		{"not found both", abi.ExportInstanceID, notFound, notFound, Agree},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Compare(tc.export, tc.inService, tc.candidate); got != tc.want {
				t.Fatalf("verdict = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestShadowedExportsAreReadOnly: no export that changes the cloud is
// ever asked of a candidate.
func TestShadowedExportsAreReadOnly(t *testing.T) {
	for _, export := range []string{
		abi.ExportEnsureLoadBalancer, abi.ExportUpdateLoadBalancer, abi.ExportEnsureLoadBalancerDeleted,
		abi.ExportCreateRoute, abi.ExportDeleteRoute, abi.ExportInit,
	} {
		if Shadowed(export) {
			t.Errorf("%s is shadowed", export)
		}
	}
}

// TestReportPrefersDestructive: the disagreements a rejection names are
// the destructive ones, even after failures filled the list.
func TestReportPrefersDestructive(t *testing.T) {
	var s Stats
	for i := range maxReported + 2 {
		s.report(Disagreement{Subject: fmt.Sprint("failed-", i)})
	}
	s.report(Disagreement{Subject: "gone", Destructive: true})
	destructive := 0
	for _, d := range s.First {
		if d.Destructive {
			destructive++
		}
	}
	if len(s.First) != maxReported || destructive != 1 {
		t.Fatalf("reported %+v", s.First)
	}
}
