package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
)

// limitedInstances asks about every existing Node with the limited
// credentials: what the cloud refuses must never read as gone or shut
// down.
func (r *runner) limitedInstances() {
	for _, sn := range r.spec.Nodes {
		if !sn.Exists || sn.ExpectError != "" {
			continue
		}
		node := sn.node()
		about := callCase{limited: true, names: instanceIDs(node), running: sn.Shutdown == nil || !*sn.Shutdown}
		for _, export := range []string{abi.ExportInstanceExists, abi.ExportInstanceMetadata, abi.ExportInstanceShutdown} {
			c := about
			c.outcome = r.with(r.limited, func() *outcome { return r.call(export, &node, outputOf(export)) })
			r.judged(RuleLimitedCredential, c.method+" with the limited credentials ("+sn.Name+")", &c)
		}
	}
}

// leaks searches everything the module said for the credential values,
// in every form the host searches answers for.
func (r *runner) leaks(values []string) {
	if len(values) == 0 {
		r.skip(RuleNoCredentialLeak, "credentials stay secret", "the module's credentials name no secret")
		return
	}
	if !slices.ContainsFunc(values, r.secrets.Holds) {
		r.skip(RuleNoCredentialLeak, "credentials stay secret", "no secret of the module's credentials is long enough for the host to search for")
		return
	}
	check := func(name string, found []string) {
		if len(found) == 0 {
			r.pass(RuleNoCredentialLeak, name)
			return
		}
		r.fail(RuleNoCredentialLeak, name, fmt.Sprintf("a credential value appears in %d place(s), first: %s", len(found), r.secrets.Redact(found[0])), nil)
	}
	r.mu.Lock()
	check("no credential in the module's log", r.leakedLogs)
	r.mu.Unlock()
	var inAnswers []string
	for _, t := range r.texts {
		if r.secrets.Holds(t.s) {
			inAnswers = append(inAnswers, t.where+": "+t.s)
		}
	}
	check("no credential in errors or results", inAnswers)
	var inURLs []string
	for _, ex := range r.ic.Since(0) {
		if ex.secretInURL {
			inURLs = append(inURLs, "request "+ex.String())
		}
	}
	check("no credential in request URLs", inURLs)
}

// rawCredentials reports, never fails, which credentials the module read
// raw through credentials.readable.
func (r *runner) rawCredentials() {
	if read := r.mod.RawCredentialReads(); len(read) > 0 {
		r.pass(RuleRawCredentials, "read raw (credentials.readable, which weakens isolation): "+strings.Join(read, ", "))
		return
	}
	r.pass(RuleRawCredentials, "no credential read raw")
}
