package provider

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmccm/wasmccm/runtime/deletion"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/sweep"
)

// Defaults is the cloud-config with the default of every field written
// out, as the host (host.Defaults) and the provider apply them to the
// fields left zero; docs/reference/cloud-config.md is made from it. A
// field whose default depends on the module or the environment
// (limits.recycleAboveMiB, module.lastKnownGood.namespace) stays zero and
// its doc comment says how it is set.
func Defaults() Config {
	h := host.Defaults()
	return Config{
		ClusterName: sweep.DefaultClusterName,
		Module: ModuleConfig{
			Rollout:       RolloutConfig{Shadow: ShadowConfig{}.WithDefaults(), Rollback: RollbackConfig{}.WithDefaults()},
			LastKnownGood: LastKnownGoodConfig{Name: defaultLastKnownGoodName},
		},
		Limits: LimitsConfig{
			PoolSize:       h.PoolSize,
			CallTimeout:    duration(h.CallTimeout),
			MemoryLimitMiB: h.MemoryLimitPages / pagesPerMiB,
			SharedStateMiB: uint32(h.SharedStateBytes >> 20),
		},
		HTTP: HTTPConfig{
			Timeout:          duration(h.HTTP.Timeout),
			MaxResponseBytes: h.HTTP.MaxResponseBytes,
		},
		Safety: SafetyConfig{MaxNodeDeletions: deletion.DefaultBudgetConfig()},
		OrphanSweep: sweep.Config{
			Period:              duration(sweep.DefaultPeriod),
			MaxDeletionsPerHour: sweep.DefaultMaxDeletionsPerHour,
		},
	}
}

// pagesPerMiB converts the cloud-config's MiB to wasm's 64 KiB pages.
const pagesPerMiB = 16

func duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }
