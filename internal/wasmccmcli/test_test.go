package wasmccmcli

import (
	"strings"
	"testing"

	"github.com/wasmccm/wasmccm/internal/conformance/conformancetest"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// The full conformance runs, every first-party module and every broken
// one, are in test/conformance: they take minutes.

// TestRawReadsOffByDefault: the module that logs the token it reads, run
// without credentials.readable, gets "not granted", leaks nothing and
// passes every rule.
func TestRawReadsOffByDefault(t *testing.T) {
	config, spec := conformancetest.Simcloud(t, `, bug: logs-token`, "")
	code, out, errOut := runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, conformancetest.Module(t, "../../internal/conformance/testdata/broken", wasmbuild.Go))
	if code != 0 || !strings.Contains(out, "no credential read raw\n") || strings.Contains(out, conformancetest.Token) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestMaxRequests: test says what a run may cost before it starts, and
// with -max-requests sends no more than that, skips the checks after and
// passes what it scored; the report says how many it sent.
func TestMaxRequests(t *testing.T) {
	config, spec := conformancetest.Simcloud(t, "", "")
	module := conformancetest.Module(t, "../../modules/simcloud/module", wasmbuild.Go)
	code, out, errOut := runCLI(t, "", "test", "-rate", "0", "-max-requests", "40", "-config", config, "-spec", spec, module)
	if code != 0 || !strings.Contains(errOut, "wasmccm test: at most 40 requests to the cloud (-max-requests); each checked call runs once clean") ||
		!strings.Contains(out, "\nsent 40 requests to the cloud\nstopped sending at the cap of 40 requests (-max-requests): the checks after it are skipped\n") ||
		!strings.Contains(out, "SKIP faults               the rest of the run: not run: the run reached its cap") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, module)
	if code != 0 || !strings.Contains(errOut, "wasmccm test: no cap on requests to the cloud (-max-requests N sets one)") || strings.Contains(out, "stopped sending") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestOptionalExportsShown: validate, test and call -trace show the
// lister next to the capabilities, and call of an optional export the
// module lacks says so and what it has.
func TestOptionalExportsShown(t *testing.T) {
	config, spec := conformancetest.Simcloud(t, "", "")
	broken := conformancetest.Module(t, "../../internal/conformance/testdata/broken", wasmbuild.Go)
	code, out, errOut := runCLI(t, "", "validate", broken)
	if code != 0 || !strings.Contains(out, "\noptional:     ListLoadBalancers, SetLoadBalancerNodes\n") {
		t.Errorf("validate: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "test", "-rate", "0", "-config", config, "-spec", spec, broken)
	if code != 0 || !strings.Contains(out, "module validates: capabilities InstancesV2, Instances, LoadBalancer, Routes, Zones; optional exports ListLoadBalancers, SetLoadBalancerNodes\n") {
		t.Errorf("test: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "call", "-trace", "-config", config, broken, "GetLoadBalancerName")
	if code != 0 || !strings.Contains(errOut, "trace: module capabilities InstancesV2, Instances, LoadBalancer, Routes, Zones; optional exports ListLoadBalancers, SetLoadBalancerNodes\n") {
		t.Errorf("call -trace: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, `"kubernetes"`, "call", testprovider(t), "ListLoadBalancers")
	if code != 1 || !strings.Contains(errOut, "the module does not export wasmccm_list_load_balancers (ListLoadBalancers), which is optional; its optional exports: SetLoadBalancerNodes; could add ListLoadBalancers (for LoadBalancer)") {
		t.Errorf("call of a missing optional export: exit %d\n%s", code, errOut)
	}
}

// TestCallTraceQueryAPI: call -trace of a query API's module shows each
// request's Action and body, not only POST /.
func TestCallTraceQueryAPI(t *testing.T) {
	config, _ := conformancetest.AWS(t)
	code, out, errOut := runCLI(t, `{"Name":"gone","ProviderID":"aws:///us-east-1a/i-0000000000000dead"}`, "call", "-trace", "-config", config,
		conformancetest.Module(t, "../../modules/aws/module", wasmbuild.Go), "InstanceExists")
	if code != 0 || out != "false\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	for _, want := range []string{"/ (Action=DescribeInstances) -> 400 (", "trace:   request body: Action=DescribeInstances&InstanceId.1=i-0000000000000dead&"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("trace lacks %q:\n%s", want, errOut)
		}
	}
}

// TestCallTrace: call -trace shows each request and log line of the call,
// with the token redacted, and leaves the JSON answer alone on stdout.
func TestCallTrace(t *testing.T) {
	config, _ := conformancetest.Simcloud(t, `, bug: logs-token`, ", readable: [token]")
	broken := conformancetest.Module(t, "../../internal/conformance/testdata/broken", wasmbuild.Go)
	code, out, errOut := runCLI(t, `{"Name":"node-1","ProviderID":"simcloud://i-0001"}`, "call", "-trace", "-config", config, broken, "InstanceExists")
	if code != 0 || out != "true\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	for _, want := range []string{"trace: http GET http://127.0.0.1:", "/v1/instances -> 200 (", "trace: log info: checked node-1 with token " + strings.Repeat("*", len(conformancetest.Token))} {
		if !strings.Contains(errOut, want) {
			t.Errorf("trace lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, conformancetest.Token) {
		t.Errorf("trace shows the token:\n%s", errOut)
	}
}
