// Package lifecycle is a module's lifecycle in wasmccm: which module
// answers each call, and how a changed module file is taken into service.
// Its decisions are pure functions of their inputs, in
// runtime/lifecycle/internal/decision: the rollout's state machine, the
// comparison of a candidate's answers with the module in service's, the
// verdicts that move a rollout on and the choice of the first module. A
// Manager carries them out: it starts the first module (Start), answers
// calls with the module in service (Call), polls the module file
// (Reload), shadows, promotes, rejects and rolls back, records the
// last-known-good module, and reports each step in metrics, logs and
// Events. What it needs of the cloud-config and the cluster (loading a
// module with its grants, reporting an Event, listing the Nodes) the
// adapter, runtime/provider, passes in (Options).
//
// A new module that validates and compiles is not put in service at once.
// It first runs in shadow: the module in service stays authoritative, and
// each read-only call it answers is asked again of the candidate, after
// the caller has its answer, and the two answers are compared. One
// destructive disagreement, or clearly more failures than the module in
// service, rejects the candidate; otherwise, once the shadow period is
// over, it is promoted. The module it replaced then stays compiled for the
// rollback window, and if the promoted module fails (traps, timeouts, ABI
// violations) too often, the host switches back. A rejected or rolled-back
// file is refused, by sha256, until the file changes again.
//
// At start-up the last-known-good record plays the previous module;
// without one (a first install) there is nothing to compare with or
// return to, and the deletion budget (runtime/deletion) is what protects
// the Nodes from a bad module.
package lifecycle
