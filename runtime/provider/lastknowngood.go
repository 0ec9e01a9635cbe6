package provider

import (
	"os"

	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// The cloud-config's side of the last-known-good record, which
// runtime/lifecycle keeps and reads.

// defaultLastKnownGoodNamespace is module.lastKnownGood.namespace's
// default when POD_NAMESPACE is unset.
const defaultLastKnownGoodNamespace = "kube-system"

// LastKnownGoodChunkNames lists every ConfigMap the record cfg names may
// use, for RBAC.
func LastKnownGoodChunkNames(cfg cloudconfig.LastKnownGood) []string {
	return modulefile.RecordNames(orDefault(cfg.Name, cloudconfig.DefaultLastKnownGoodName))
}

func newLastKnownGoodStore(client typedcorev1.ConfigMapsGetter, cfg cloudconfig.LastKnownGood) *modulefile.Store {
	namespace := cfg.Namespace
	if namespace == "" {
		namespace = orDefault(os.Getenv("POD_NAMESPACE"), defaultLastKnownGoodNamespace)
	}
	return modulefile.NewStore(client, namespace, orDefault(cfg.Name, cloudconfig.DefaultLastKnownGoodName))
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
