package decision

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"

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

// shadowed are the exports that read the cloud without changing it.
// Mutating exports (Ensure*, Update*, Create*, Delete*) are never called
// on a candidate: it would act on the cloud twice.
var shadowed = map[string]bool{
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

// Answer is one module's answer to a call.
type Answer struct {
	Out abi.Message
	Err error
}

// Verdict classifies a pair of answers.
type Verdict int

const (
	// Agree: same answer, or both failed.
	Agree Verdict = iota
	// Benign: different answers, neither destructive.
	Benign
	// Destructive: the candidate says gone where the module in
	// service says present.
	Destructive
	// CandidateFailed: only the candidate failed.
	CandidateFailed
	// InServiceFailed: only the module in service failed.
	InServiceFailed
)

func (v Verdict) String() string {
	return [...]string{"agree", "benign", "destructive", "candidate_failed", "in_service_failed"}[v]
}

// Compare applies the rules to one call's answers.
func Compare(export string, inService, candidate Answer) Verdict {
	switch {
	case inService.Err != nil && candidate.Err != nil:
		return Agree
	case inService.Err != nil:
		return InServiceFailed
	case Gone(export, candidate) && !Gone(export, inService):
		return Destructive
	case candidate.Err != nil:
		return CandidateFailed
	case bytes.Equal(abi.Marshal(nil, inService.Out), abi.Marshal(nil, candidate.Out)):
		return Agree
	}
	return Benign
}

// Gone reports whether a controller would read a as "the instance, or
// load balancer, is not there", or a Node as shut down: the answers that
// lead to deletions, cordons and re-creations.
func Gone(export string, a Answer) bool {
	switch export {
	case abi.ExportInstanceExists, abi.ExportInstanceExistsByProviderID:
		return a.Err == nil && !bool(*a.Out.(*abi.Bool))
	case abi.ExportInstanceShutdown, abi.ExportInstanceShutdownByProviderID:
		return a.Err == nil && bool(*a.Out.(*abi.Bool))
	case abi.ExportGetLoadBalancer:
		return a.Err == nil && !a.Out.(*abi.GetLoadBalancerResult).Exists
	}
	var status *host.StatusError
	return errors.As(a.Err, &status) && status.Status == abi.StatusNotFound
}

// Shadowed reports whether calls to export are asked of a candidate too.
func Shadowed(export string) bool { return shadowed[export] }

// NewOut returns an empty message of out's type for the candidate to
// fill.
func NewOut(out abi.Message) abi.Message {
	return reflect.New(reflect.TypeOf(out).Elem()).Interface().(abi.Message)
}

// Disagreement is one destructive or failing candidate answer, as the
// ModuleRejected Event reports it.
type Disagreement struct {
	Export, Subject      string
	InService, Candidate string
	Destructive          bool
}

func (d Disagreement) String() string {
	return fmt.Sprintf("%s(%s): in service %s, new %s", d.Export, d.Subject, d.InService, d.Candidate)
}

// maxReported disagreements are named in a ModuleRejected Event.
const maxReported = 3

// Stats sums a shadow period.
type Stats struct {
	ByVerdict [InServiceFailed + 1]int
	// Dropped counts the shadow calls left out because the shadow
	// concurrency was full.
	Dropped int
	// Throttled counts the calls left out because the rate budget refused
	// one of the candidate's requests (host.ErrShadowThrottled).
	Throttled int
	// First holds the first disagreements worth reporting.
	First []Disagreement
}

// Record compares the answers of one call (export, with argument in) and
// counts the verdict, keeping the first maxReported disagreements,
// destructive ones before failures: they are what a rejection is about.
func (s *Stats) Record(export string, in abi.Message, inService, candidate Answer) Verdict {
	v := Compare(export, inService, candidate)
	s.ByVerdict[v]++
	if v == Destructive || v == CandidateFailed {
		s.report(Disagreement{
			Export: strings.TrimPrefix(export, "wasmccm_"), Subject: subject(in),
			InService: describe(export, inService), Candidate: describe(export, candidate),
			Destructive: v == Destructive,
		})
	}
	return v
}

func (s *Stats) report(d Disagreement) {
	if len(s.First) < maxReported {
		s.First = append(s.First, d)
		return
	}
	if d.Destructive {
		for i := range s.First {
			if !s.First[i].Destructive {
				s.First[i] = d
				return
			}
		}
	}
}

// Compared is the number of calls compared.
func (s Stats) Compared() int {
	n := 0
	for _, c := range s.ByVerdict {
		n += c
	}
	return n
}

// Clone returns a copy that shares nothing with s.
func (s Stats) Clone() Stats {
	s.First = append([]Disagreement(nil), s.First...)
	return s
}

func (s Stats) String() string {
	return fmt.Sprintf("%d calls compared: %d agreed, %d benign differences, %d destructive, %d failed only on the new module, %d failed only on the module in service; %d shadow calls dropped, %d not compared because the rate budget (http.rateLimits) had no spare room for the new module",
		s.Compared(), s.ByVerdict[Agree], s.ByVerdict[Benign], s.ByVerdict[Destructive],
		s.ByVerdict[CandidateFailed], s.ByVerdict[InServiceFailed], s.Dropped, s.Throttled)
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
func describe(export string, a Answer) string {
	if a.Err != nil {
		return "error (" + a.Err.Error() + ")"
	}
	switch out := a.Out.(type) {
	case *abi.Bool:
		return fmt.Sprint(bool(*out))
	case *abi.GetLoadBalancerResult:
		return fmt.Sprintf("exists=%v", out.Exists)
	}
	if Gone(export, a) {
		return "not found"
	}
	return "an answer"
}
