package provider

import (
	"os"

	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// The cloud-config's side of the last-known-good record, which
// runtime/lifecycle keeps and reads.

// Defaults of module.lastKnownGood.
const (
	defaultLastKnownGoodName      = "wasmccm-last-known-good"
	defaultLastKnownGoodNamespace = "kube-system"
)

// LastKnownGoodConfig is module.lastKnownGood.
type LastKnownGoodConfig struct {
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

// ChunkNames lists every ConfigMap the record may use, for RBAC.
func (c LastKnownGoodConfig) ChunkNames() []string {
	return modulefile.RecordNames(orDefault(c.Name, defaultLastKnownGoodName))
}

func newLastKnownGoodStore(client typedcorev1.ConfigMapsGetter, cfg LastKnownGoodConfig) *modulefile.Store {
	namespace := cfg.Namespace
	if namespace == "" {
		namespace = orDefault(os.Getenv("POD_NAMESPACE"), defaultLastKnownGoodNamespace)
	}
	return modulefile.NewStore(client, namespace, orDefault(cfg.Name, defaultLastKnownGoodName))
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
