package cloudconfig

// DefaultLastKnownGoodName is module.lastKnownGood.name's default.
const DefaultLastKnownGoodName = "wasmccm-last-known-good"

// LastKnownGood is module.lastKnownGood, the record runtime/lifecycle
// keeps and reads.
type LastKnownGood struct {
	// Disabled turns the record off: every start then serves the configured
	// module unshadowed, as a first install does.
	Disabled bool `json:"disabled,omitempty"`
	// Namespace defaults to the POD_NAMESPACE environment variable, else
	// kube-system.
	Namespace string `json:"namespace,omitempty"`
	// Name is the record's ConfigMap, and the prefix of its chunks';
	// with several modules it defaults to wasmccm-last-known-good-NAME.
	Name string `json:"name,omitempty"`
}
