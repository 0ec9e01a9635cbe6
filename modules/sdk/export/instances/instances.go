// Package instances adds the legacy Instances exports to a module. New
// providers implement InstancesV2 instead; this exists for providers ported
// from CCMs that still use the legacy interface.
package instances

import (
	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/internal/guest"
)

var impl sdk.Instances

// Set registers the implementation. Call it from an init function.
func Set(p sdk.Instances) { impl = p }

func nodeAddresses(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(name *abi.String) (abi.NodeAddresses, error) {
		return impl.NodeAddresses(guest.Context(), string(*name))
	})
}

func nodeAddressesByProviderID(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(id *abi.String) (abi.NodeAddresses, error) {
		return impl.NodeAddressesByProviderID(guest.Context(), string(*id))
	})
}

func instanceID(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(name *abi.String) (abi.String, error) {
		id, err := impl.InstanceID(guest.Context(), string(*name))
		return abi.String(id), err
	})
}

func instanceType(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(name *abi.String) (abi.String, error) {
		t, err := impl.InstanceType(guest.Context(), string(*name))
		return abi.String(t), err
	})
}

func instanceTypeByProviderID(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(id *abi.String) (abi.String, error) {
		t, err := impl.InstanceTypeByProviderID(guest.Context(), string(*id))
		return abi.String(t), err
	})
}

func instanceExistsByProviderID(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(id *abi.String) (abi.Bool, error) {
		ok, err := impl.InstanceExistsByProviderID(guest.Context(), string(*id))
		return abi.Bool(ok), err
	})
}

func instanceShutdownByProviderID(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(id *abi.String) (abi.Bool, error) {
		ok, err := impl.InstanceShutdownByProviderID(guest.Context(), string(*id))
		return abi.Bool(ok), err
	})
}

func currentNodeName(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(hostname *abi.String) (abi.String, error) {
		name, err := impl.CurrentNodeName(guest.Context(), string(*hostname))
		return abi.String(name), err
	})
}
