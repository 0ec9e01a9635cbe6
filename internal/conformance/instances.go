package conformance

import (
	"fmt"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
)

// instances checks every Node of the spec, and again by name those the
// spec says a brand-new Node finds so: clean against the spec, and under
// every fault.
func (r *runner) instances() {
	if len(r.spec.Nodes) == 0 {
		r.skip(RuleInstances, "InstancesV2", "the test spec lists no nodes")
		return
	}
	for _, sn := range r.spec.Nodes {
		if !r.instanceChecks(sn, sn.node(), "("+sn.Name+")") {
			return
		}
		if sn.LookupByName && sn.ProviderID != "" {
			// A brand-new Node has no provider ID yet: the module must
			// find its instance by the Node's name.
			byName := sn.node()
			byName.ProviderID = ""
			if !r.instanceChecks(sn, byName, "("+sn.Name+" by name)") {
				return
			}
		}
	}
}

// instanceChecks checks InstanceExists, InstanceMetadata and
// InstanceShutdown of one Node, clean and under every fault. It reports
// false when the module does not implement them.
func (r *runner) instanceChecks(sn SpecNode, node abi.Node, label string) bool {
	exists := func() *outcome { return r.call(abi.ExportInstanceExists, &node, newBool) }
	meta := func() *outcome { return r.call(abi.ExportInstanceMetadata, &node, newMetadata) }
	shutdown := func() *outcome { return r.call(abi.ExportInstanceShutdown, &node, newBool) }

	e := exists()
	if r.notImplemented(e, abi.CapabilityInstancesV2) {
		return false
	}
	var why string
	switch {
	case sn.ExpectError != "":
		why = sn.judgeError(e)
	case !e.ok():
		why = "InstanceExists failed against a healthy cloud"
	case bool(*e.out.(*abi.Bool)) != sn.Exists:
		why = fmt.Sprintf("InstanceExists answered %v; the test spec says exists: %v", *e.out.(*abi.Bool), sn.Exists)
	}
	r.check(RuleInstances, "InstanceExists"+label, why, e)
	if !sn.Exists && sn.ExpectError == "" {
		// What the call above kept (a snapshot, say) must not be
		// enough to call the instance gone.
		again := r.warmCall(abi.ExportInstanceExists, &node, newBool)
		why := ""
		if again.ok() && !bool(*again.out.(*abi.Bool)) && len(again.trace) == 0 {
			why = "InstanceExists answered false without asking the cloud in that call: an answer that deletes the Node must come from the cloud's own answer, not from what the module kept"
		}
		r.check(RuleGoneConfirmed, "InstanceExists again with kept state"+label, why, again)
	}

	m := meta()
	r.check(RuleInstances, "InstanceMetadata"+label, sn.judgeMetadata(m), m)

	s := shutdown()
	r.check(RuleInstances, "InstanceShutdown"+label, sn.judgeShutdown(s), s)

	ids := instanceIDs(node)
	var keptCheck func(Fault, int) bool
	if sn.Exists && sn.ExpectError == "" {
		keptCheck = r.keptAfterFault("InstanceExists"+label, len(e.trace), func() *outcome {
			return r.warmCall(abi.ExportInstanceExists, &node, newBool)
		})
	}
	r.underFaults("InstanceExists"+label, e, exists, keptCheck, callCase{names: ids})
	r.underFaults("InstanceMetadata"+label, m, meta, nil, callCase{names: ids})
	r.underFaults("InstanceShutdown"+label, s, shutdown, nil, callCase{names: ids, running: saysRunning(s)})

	if node.ProviderID != "" && r.info.Supports(abi.CapabilityZones) {
		pid := abi.String(node.ProviderID)
		zone := func() *outcome { return r.call(abi.ExportGetZoneByProviderID, &pid, newZone) }
		z := zone()
		r.check(RuleInstances, "GetZoneByProviderID"+label, sn.judgeZone(z), z)
		r.underFaults("GetZoneByProviderID"+label, z, zone, nil, callCase{names: ids})
	}
	if r.info.Supports(abi.CapabilityInstances) {
		r.legacyInstanceChecks(sn, node, label)
	}
	return true
}

// legacyInstanceChecks checks the Instances (v1) methods whose answers
// delete or taint a Node, under every fault.
func (r *runner) legacyInstanceChecks(sn SpecNode, node abi.Node, label string) {
	ids := instanceIDs(node)
	if node.ProviderID != "" {
		pid := abi.String(node.ProviderID)
		exists := func() *outcome { return r.call(abi.ExportInstanceExistsByProviderID, &pid, newBool) }
		shutdown := func() *outcome { return r.call(abi.ExportInstanceShutdownByProviderID, &pid, newBool) }
		e, s := exists(), shutdown()
		r.underFaults("InstanceExistsByProviderID"+label, e, exists, nil, callCase{names: ids})
		r.underFaults("InstanceShutdownByProviderID"+label, s, shutdown, nil, callCase{names: ids, running: saysRunning(s)})
	}
	name := abi.String(node.Name)
	id := func() *outcome { return r.call(abi.ExportInstanceID, &name, newString) }
	o := id()
	if o.status == abi.StatusNotImplemented {
		return
	}
	r.underFaults("InstanceID"+label, o, id, nil, callCase{names: ids})
}

// keptAfterFault returns the check underFaults runs after each faulted
// InstanceExists of an instance that exists: the call again, clean, with
// what the faulted call kept in shared state. A listing that failed
// part-way and was kept as if complete lacks instances that exist; an
// answer of false from it deletes their Nodes. It records one failure per
// fault, or one pass once the last fault's calls are done.
func (r *runner) keptAfterFault(name string, requests int, again func() *outcome) func(Fault, int) bool {
	failed := map[Fault]bool{}
	return func(f Fault, k int) bool {
		if !failed[f] {
			if o := again(); o.ok() && !bool(*o.out.(*abi.Bool)) {
				failed[f] = true
				r.check(RuleGoneConfirmed, fmt.Sprintf("%s clean, after a call under %s (request %d of %d) kept its state", name, f, k+1, requests),
					"InstanceExists answered false for an instance that exists, from what the faulted call before it kept: a listing that failed part-way must not be kept as if complete, and an answer that deletes the Node must come from the cloud's own answer in that call", o)
			}
		}
		if f == Faults[len(Faults)-1] && k == requests-1 && len(failed) == 0 {
			r.pass(RuleGoneConfirmed, name+" clean, after each faulted call, with what it kept")
		}
		return true
	}
}

// saysRunning reports whether the InstanceShutdown o answered that the
// instance runs.
func saysRunning(o *outcome) bool { return o.ok() && !bool(*o.out.(*abi.Bool)) }

// instanceIDs are what names a Node's instance in a request: the Node's
// name, its provider ID and the provider ID's last part (i-0001 of
// aws:///us-east-1a/i-0001).
func instanceIDs(node abi.Node) []string {
	ids := []string{node.Name}
	if pid := node.ProviderID; pid != "" {
		ids = append(ids, pid)
		if last := pid[strings.LastIndex(pid, "/")+1:]; last != "" && last != pid {
			ids = append(ids, last)
		}
	}
	return ids
}

// judgeError compares a call of a Node with expectError with the spec.
func (sn SpecNode) judgeError(o *outcome) string {
	if o.status.String() != sn.ExpectError {
		return fmt.Sprintf("%s answered %s; the test spec says expectError: %s", o.method, o.status, sn.ExpectError)
	}
	return ""
}

// judgeShutdown compares a clean InstanceShutdown with the spec.
func (sn SpecNode) judgeShutdown(o *outcome) string {
	switch {
	case sn.ExpectError != "":
		return sn.judgeError(o)
	case !sn.Exists:
		if o.ok() && bool(*o.out.(*abi.Bool)) {
			return "InstanceShutdown answered true for an instance that does not exist"
		}
		return ""
	case !o.ok():
		return "InstanceShutdown failed against a healthy cloud"
	case sn.Shutdown != nil && bool(*o.out.(*abi.Bool)) != *sn.Shutdown:
		return fmt.Sprintf("InstanceShutdown answered %v; the test spec says shutdown: %v", *o.out.(*abi.Bool), *sn.Shutdown)
	}
	return ""
}

// judgeZone compares a clean GetZoneByProviderID with the spec.
func (sn SpecNode) judgeZone(o *outcome) string {
	switch {
	case sn.ExpectError != "" || !sn.Exists:
		return ""
	case !o.ok():
		return "GetZoneByProviderID failed against a healthy cloud"
	}
	z := o.out.(*abi.Zone)
	var diffs []string
	if sn.Zone != "" && z.FailureDomain != sn.Zone {
		diffs = append(diffs, fmt.Sprintf("failureDomain is %q, the test spec says zone %q", z.FailureDomain, sn.Zone))
	}
	if sn.Region != "" && z.Region != sn.Region {
		diffs = append(diffs, fmt.Sprintf("region is %q, the test spec says %q", z.Region, sn.Region))
	}
	return strings.Join(diffs, "; ")
}

// judgeMetadata compares a clean InstanceMetadata with the spec.
func (sn SpecNode) judgeMetadata(o *outcome) string {
	if sn.ExpectError != "" {
		return sn.judgeError(o)
	}
	if !sn.Exists {
		if o.status != abi.StatusNotFound {
			return "InstanceMetadata of an instance that does not exist must answer NotFound"
		}
		return ""
	}
	if !o.ok() {
		return "InstanceMetadata failed against a healthy cloud"
	}
	m := o.out.(*abi.InstanceMetadata)
	var diffs []string
	want := func(field, got, want string) {
		if want != "" && got != want {
			diffs = append(diffs, fmt.Sprintf("%s is %q, the test spec says %q", field, got, want))
		}
	}
	want("providerID", m.ProviderID, sn.ProviderID)
	want("instanceType", m.InstanceType, sn.InstanceType)
	want("zone", m.Zone, sn.Zone)
	want("region", m.Region, sn.Region)
	if m.ProviderID == "" {
		diffs = append(diffs, "providerID is empty")
	}
	return strings.Join(diffs, "; ")
}

// notImplemented fails the capability check when a method of an exported
