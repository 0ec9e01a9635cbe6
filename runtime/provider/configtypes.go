package provider

import (
	"github.com/wasmccm/wasmccm/runtime/deletion"
	"github.com/wasmccm/wasmccm/runtime/lifecycle"
)

// SafetyConfig bounds what the module's answers can make the upstream
// controllers do.
type SafetyConfig struct {
	// MaxNodeDeletions is the deletion budget: how many Nodes the
	// module's "gone" answers may delete in a window.
	MaxNodeDeletions DeletionBudgetConfig `json:"maxNodeDeletions,omitempty"`
}

// DeletionBudgetConfig is safety.maxNodeDeletions, CorroborationConfig
// safety.maxNodeDeletions.corroborated (runtime/deletion).
type (
	DeletionBudgetConfig = deletion.BudgetConfig
	CorroborationConfig  = deletion.CorroborationConfig
)

func (c SafetyConfig) validate() error { return c.MaxNodeDeletions.Validate() }

// RolloutConfig is module.rollout (runtime/lifecycle), ShadowConfig and
// RollbackConfig its parts.
type (
	RolloutConfig  = lifecycle.RolloutConfig
	ShadowConfig   = lifecycle.ShadowConfig
	RollbackConfig = lifecycle.RollbackConfig
)
