package decision

import "testing"

// TestDecideStart: which module a start serves, for every combination of
// what it knows; the recorded module is loaded only when it matters.
func TestDecideStart(t *testing.T) {
	cases := []struct {
		name         string
		facts        StartFacts
		needRecorded bool
		want         StartReason
		wantOK       bool
	}{
		{"first install", StartFacts{ConfiguredUsable: true}, false, FirstInstall, true},
		{"first install, configured unusable", StartFacts{}, false, FirstInstall, false},
		{"configured is the recorded one", StartFacts{HasRecord: true, ConfiguredUsable: true, SameDigest: true}, false, Recorded, true},
		{"configured differs", StartFacts{HasRecord: true, ConfiguredUsable: true, RecordedUsable: true, SameCapabilities: true}, true, Shadowing, true},
		{"capabilities differ", StartFacts{HasRecord: true, ConfiguredUsable: true, RecordedUsable: true}, true, CapabilitiesChanged, true},
		{"configured unusable", StartFacts{HasRecord: true, RecordedUsable: true}, true, ConfiguredUnusable, true},
		{"recorded unusable", StartFacts{HasRecord: true, ConfiguredUsable: true}, true, LastKnownGoodUnusable, true},
		{"neither usable", StartFacts{HasRecord: true}, true, LastKnownGoodUnusable, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NeedsRecorded(tc.facts); got != tc.needRecorded {
				t.Fatalf("NeedsRecorded = %v, want %v", got, tc.needRecorded)
			}
			got, ok := DecideStart(tc.facts)
			if ok != tc.wantOK || ok && got != tc.want {
				t.Fatalf("DecideStart = %s, %v; want %s, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	if !Recorded.ServesConfigured() || !CapabilitiesChanged.ServesConfigured() || Shadowing.ServesConfigured() || ConfiguredUnusable.ServesConfigured() {
		t.Fatal("ServesConfigured names the wrong module")
	}
}
