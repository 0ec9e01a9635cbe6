package provider

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// Comparison of a candidate module's answers with the module in service.
//
// During a shadow rollout every read-only call is answered by the module in
// service and then asked again of the candidate; the two answers are
// compared here. The rules are about consequences: an answer that would
// make a controller delete or cordon something the module in service says
// is there is destructive, and one destructive disagreement rejects the
// candidate; any other difference (a new label, another instance type) is
// benign and only counted.

// shadowedExports are the exports that read the cloud without changing it.
// Mutating exports (Ensure*, Update*, Create*, Delete*) are never called
// on a candidate: it would act on the cloud twice.
var shadowedExports = map[string]bool{
	abi.ExportInstanceExists:               true,
	abi.ExportInstanceShutdown:             true,
	abi.ExportInstanceMetadata:             true,
	abi.ExportNodeAddresses:                true,
	abi.ExportNodeAddressesByProviderID:    true,
	abi.ExportInstanceID:                   true,
	abi.ExportInstanceType:                 true,
	abi.ExportInstanceTypeByProviderID:     true,
	abi.ExportInstanceExistsByProviderID:   true,
	abi.ExportInstanceShutdownByProviderID: true,
	abi.ExportCurrentNodeName:              true,
	abi.ExportGetLoadBalancer:              true,
	abi.ExportGetLoadBalancerName:          true,
	abi.ExportListRoutes:                   true,
	abi.ExportGetZone:                      true,
	abi.ExportGetZoneByProviderID:          true,
	abi.ExportGetZoneByNodeName:            true,
}

// answer is one module's answer to a call.
type answer struct {
	out abi.Message
	err error
}

// verdict classifies a pair of answers.
type verdict int

const (
	// verdictAgree: same answer, or both failed.
	verdictAgree verdict = iota
	// verdictBenign: different answers, neither destructive.
	verdictBenign
	// verdictDestructive: the candidate says gone where the module in
	// service says present.
	verdictDestructive
	// verdictCandidateFailed: only the candidate failed.
	verdictCandidateFailed
	// verdictInServiceFailed: only the module in service failed.
	verdictInServiceFailed
)

func (v verdict) String() string {
	return [...]string{"agree", "benign", "destructive", "candidate_failed", "in_service_failed"}[v]
}

// compareAnswers applies the rules to one call's answers.
func compareAnswers(export string, inService, candidate answer) verdict {
	switch {
	case inService.err != nil && candidate.err != nil:
		return verdictAgree
	case inService.err != nil:
		return verdictInServiceFailed
	case gone(export, candidate) && !gone(export, inService):
		return verdictDestructive
	case candidate.err != nil:
		return verdictCandidateFailed
	case bytes.Equal(abi.Marshal(nil, inService.out), abi.Marshal(nil, candidate.out)):
		return verdictAgree
	}
	return verdictBenign
}

// gone reports whether a controller would read a as "the instance, or
// load balancer, is not there", or a Node as shut down: the answers that
// lead to deletions, cordons and re-creations.
func gone(export string, a answer) bool {
	switch export {
	case abi.ExportInstanceExists, abi.ExportInstanceExistsByProviderID:
		return a.err == nil && !bool(*a.out.(*abi.Bool))
	case abi.ExportInstanceShutdown, abi.ExportInstanceShutdownByProviderID:
		return a.err == nil && bool(*a.out.(*abi.Bool))
	case abi.ExportGetLoadBalancer:
		return a.err == nil && !a.out.(*abi.GetLoadBalancerResult).Exists
	}
	var status *host.StatusError
	return errors.As(a.err, &status) && status.Status == abi.StatusNotFound
}

// newAnswer returns an empty message of out's type for the candidate to
// fill.
func newAnswer(out abi.Message) abi.Message {
	return reflect.New(reflect.TypeOf(out).Elem()).Interface().(abi.Message)
}

// disagreement is one destructive or failing candidate answer, as the
// ModuleRejected Event reports it.
type disagreement struct {
	export, subject      string
	inService, candidate string
	destructive          bool
}

func (d disagreement) String() string {
	return fmt.Sprintf("%s(%s): in service %s, new %s", d.export, d.subject, d.inService, d.candidate)
}

// subject names what a call was about, for reports.
func subject(in abi.Message) string {
	switch in := in.(type) {
	case *abi.Node:
		return in.Name
	case *abi.String:
		return string(*in)
	case *abi.LoadBalancerRequest:
		return in.Service.Namespace + "/" + in.Service.Name
	case *abi.RouteRequest:
		return in.ClusterName
	}
	return ""
}

// describe renders an answer briefly.
func describe(export string, a answer) string {
	if a.err != nil {
		return "error (" + a.err.Error() + ")"
	}
	switch out := a.out.(type) {
	case *abi.Bool:
		return fmt.Sprint(bool(*out))
	case *abi.GetLoadBalancerResult:
		return fmt.Sprintf("exists=%v", out.Exists)
	}
	if gone(export, a) {
		return "not found"
	}
	return "an answer"
}
