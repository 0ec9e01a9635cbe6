// Command relabel is a legitimate update of the simcloud provider module:
// it adds one label to the metadata of every instance, and changes
// nothing else.
package main

import (
	"context"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/simcloud"
	"github.com/wasmccm/wasmccm/test/e2e/testdata/simvariant"
)

// GenerationLabel is the label the update adds, with value "2".
const GenerationLabel = "simcloud.example/generation"

// relabel is the simcloud provider with one more label.
type relabel struct{ *simcloud.Provider }

func (r relabel) InstanceMetadata(ctx context.Context, node *abi.Node) (*abi.InstanceMetadata, error) {
	meta, err := r.Provider.InstanceMetadata(ctx, node)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{GenerationLabel: "2"}
	for k, v := range meta.AdditionalLabels {
		labels[k] = v
	}
	meta.AdditionalLabels = labels
	return meta, nil
}

func init() {
	simvariant.Serve(func(p *simcloud.Provider) sdk.InstancesV2 { return relabel{p} })
}

func main() {}
