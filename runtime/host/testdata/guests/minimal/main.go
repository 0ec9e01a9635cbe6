// Command minimal is a provider module with only the InstancesV2
// capability, for the host's capability-masking tests.
package main

import (
	"context"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
)

type provider struct{}

func init() {
	sdk.Set(provider{})
	instancesv2.Set(provider{})
}

func main() {}

func (provider) Init(context.Context, string, []byte) error { return nil }

func (provider) InstanceExists(context.Context, *abi.Node) (bool, error)   { return true, nil }
func (provider) InstanceShutdown(context.Context, *abi.Node) (bool, error) { return false, nil }
func (provider) InstanceMetadata(_ context.Context, n *abi.Node) (*abi.InstanceMetadata, error) {
	return &abi.InstanceMetadata{ProviderID: "minimal://" + n.Name}, nil
}
