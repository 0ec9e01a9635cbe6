// Command recursing is the simcloud provider module with an InstanceExists
// that recurses without a loop: a binary call tree 60 levels deep, about
// 2^60 calls, which would run for centuries. Built with TinyGo its code
// has no loop at all, so only the host's check at function entries can
// stop it: the call must end at its deadline, as a timeout, and the CCM
// must go on serving meanwhile.
package main

import (
	"context"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/simcloud"
	"github.com/wasmccm/wasmccm/test/e2e/testdata/simvariant"
)

// recursing is the simcloud provider but for InstanceExists.
type recursing struct{ *simcloud.Provider }

// calls is written by every call of tree, so that the compiler can
// neither merge its two recursive calls nor drop them.
var calls uint64

// tree subtracts its second call's result, an operation the compiler
// cannot turn into a loop as it would an accumulated sum or xor.
//
//go:noinline
func tree(depth int) uint64 {
	calls++
	if depth == 0 {
		return calls
	}
	return tree(depth-1) - tree(depth-1)
}

// InstanceExists answers only after the call tree, that is never.
func (recursing) InstanceExists(_ context.Context, node *abi.Node) (bool, error) {
	return tree(60+len(node.Name)%2) == 0, nil
}

func init() {
	simvariant.Serve(func(p *simcloud.Provider) sdk.InstancesV2 { return recursing{p} })
}

func main() {}
