package decision

// StartReason is which module a CCM start puts in service and why; its
// String is the reason label of wasmccm_module_starts_total.
type StartReason int

const (
	// FirstInstall: there is no last-known-good record; the configured
	// module serves.
	FirstInstall StartReason = iota
	// Recorded: the configured module is the last-known-good one.
	Recorded
	// LastKnownGoodUnusable: the recorded module cannot be loaded; the
	// configured one serves without a shadow period.
	LastKnownGoodUnusable
	// CapabilitiesChanged: the configured module's capabilities differ
	// from the recorded one's, and the controllers start with the
	// configured ones; it serves without a shadow period.
	CapabilitiesChanged
	// ConfiguredUnusable: the configured module cannot be read, verified
	// or loaded; the last-known-good one serves.
	ConfiguredUnusable
	// Shadowing: the last-known-good module serves while the configured
	// one, which differs, is rolled out (event Loaded).
	Shadowing
)

func (r StartReason) String() string {
	return [...]string{"first_install", "recorded", "last_known_good_unusable", "capabilities_changed", "configured_unusable", "shadowing"}[r]
}

// ServesConfigured reports whether the configured module serves first;
// otherwise the last-known-good one does.
func (r StartReason) ServesConfigured() bool { return r < ConfiguredUnusable }

// StartFacts is what a start knows about the two modules it may serve.
type StartFacts struct {
	// HasRecord: a last-known-good module is recorded. ConfiguredUsable:
	// the configured module was read, verified and loaded. SameDigest: it
	// is the recorded one.
	HasRecord, ConfiguredUsable, SameDigest bool
	// Known only once the recorded module was loaded (NeedsRecorded):
	// whether it could be, and whether both modules have the same
	// capabilities.
	RecordedUsable, SameCapabilities bool
}

// NeedsRecorded reports whether the start must load the recorded module
// to decide.
func NeedsRecorded(f StartFacts) bool {
	return f.HasRecord && !(f.ConfiguredUsable && f.SameDigest)
}

// DecideStart returns why the module that serves first does; ok is false
// when neither can serve, and the CCM refuses to start. The configured
// module serves when there is no record or it is the recorded one;
// otherwise the recorded one serves and the configured one is rolled out,
// unless one of them cannot serve or their capabilities differ.
func DecideStart(f StartFacts) (reason StartReason, ok bool) {
	switch {
	case !f.HasRecord:
		return FirstInstall, f.ConfiguredUsable
	case !NeedsRecorded(f):
		return Recorded, true
	case !f.RecordedUsable:
		return LastKnownGoodUnusable, f.ConfiguredUsable
	case !f.ConfiguredUsable:
		return ConfiguredUnusable, true
	case !f.SameCapabilities:
		return CapabilitiesChanged, true
	}
	return Shadowing, true
}
