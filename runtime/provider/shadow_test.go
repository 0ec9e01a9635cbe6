package provider

import (
	"errors"
	"fmt"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host"
)

func TestCompareAnswers(t *testing.T) {
	yes, no := abi.Bool(true), abi.Bool(false)
	boolean := func(b abi.Bool) answer { return answer{out: &b} }
	str := func(s string) answer { v := abi.String(s); return answer{out: &v} }
	lb := func(exists bool) answer { return answer{out: &abi.GetLoadBalancerResult{Exists: exists}} }
	meta := func(label string) answer {
		return answer{out: &abi.InstanceMetadata{ProviderID: "sim://1", AdditionalLabels: map[string]string{"gen": label}}}
	}
	notFound := answer{err: &host.StatusError{Export: "x", Outcome: abi.Outcome{Status: abi.StatusNotFound}}}
	cloudError := answer{err: &host.StatusError{Export: "x", Outcome: abi.Outcome{Status: abi.StatusError, Message: "503"}}}
	trap := answer{err: &host.FailureError{Export: "x", Reason: host.ReasonTrap, Err: errors.New("panic")}}

	cases := []struct {
		name                 string
		export               string
		inService, candidate answer
		want                 verdict
	}{
		{"exists agrees", abi.ExportInstanceExists, boolean(yes), boolean(yes), verdictAgree},
		{"gone agrees", abi.ExportInstanceExists, boolean(no), boolean(no), verdictAgree},
		{"exists -> gone", abi.ExportInstanceExists, boolean(yes), boolean(no), verdictDestructive},
		{"gone -> exists", abi.ExportInstanceExists, boolean(no), boolean(yes), verdictBenign},
		{"legacy exists -> gone", abi.ExportInstanceExistsByProviderID, boolean(yes), boolean(no), verdictDestructive},
		{"running -> shut down", abi.ExportInstanceShutdown, boolean(no), boolean(yes), verdictDestructive},
		{"shut down -> running", abi.ExportInstanceShutdownByProviderID, boolean(yes), boolean(no), verdictBenign},
		{"exists -> NotFound status is a failure, not gone", abi.ExportInstanceExists, boolean(yes), notFound, verdictCandidateFailed},
		{"instance ID -> not found", abi.ExportInstanceID, str("i-1"), notFound, verdictDestructive},
		{"metadata -> not found", abi.ExportInstanceMetadata, meta("1"), notFound, verdictDestructive},
		{"metadata label change", abi.ExportInstanceMetadata, meta("1"), meta("2"), verdictBenign},
		{"metadata equal", abi.ExportInstanceMetadata, meta("1"), meta("1"), verdictAgree},
		{"load balancer -> gone", abi.ExportGetLoadBalancer, lb(true), lb(false), verdictDestructive},
		{"load balancer appears", abi.ExportGetLoadBalancer, lb(false), lb(true), verdictBenign},
		{"candidate traps", abi.ExportInstanceExists, boolean(yes), trap, verdictCandidateFailed},
		{"candidate cloud error", abi.ExportGetZoneByNodeName, str("z"), cloudError, verdictCandidateFailed},
		{"in service fails", abi.ExportInstanceExists, trap, boolean(no), verdictInServiceFailed},
		{"both fail", abi.ExportInstanceExists, trap, cloudError, verdictAgree},
		{"not found both", abi.ExportInstanceID, notFound, notFound, verdictAgree},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := compareAnswers(tc.export, tc.inService, tc.candidate); got != tc.want {
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
		if shadowedExports[export] {
			t.Errorf("%s is shadowed", export)
		}
	}
}

// TestReportPrefersDestructive: the disagreements a rejection names are
// the destructive ones, even after failures filled the list.
func TestReportPrefersDestructive(t *testing.T) {
	var s comparisonStats
	for i := range maxReported + 2 {
		s.report(disagreement{subject: fmt.Sprint("failed-", i)})
	}
	s.report(disagreement{subject: "gone", destructive: true})
	destructive := 0
	for _, d := range s.first {
		if d.destructive {
			destructive++
		}
	}
	if len(s.first) != maxReported || destructive != 1 {
		t.Fatalf("reported %+v", s.first)
	}
}
