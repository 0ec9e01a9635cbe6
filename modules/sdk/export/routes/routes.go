// Package routes adds the Routes exports to a module.
package routes

import (
	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/internal/guest"
)

var impl sdk.Routes

// Set registers the implementation. Call it from an init function.
func Set(p sdk.Routes) { impl = p }

func listRoutes(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(r *abi.RouteRequest) (abi.Routes, error) {
		return impl.ListRoutes(guest.Context(), r.ClusterName)
	})
}

func createRoute(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(r *abi.RouteRequest) (abi.Empty, error) {
		return abi.Empty{}, impl.CreateRoute(guest.Context(), r.ClusterName, r.NameHint, &r.Route)
	})
}

func deleteRoute(in []byte) []byte {
	return guest.Handle(in, impl != nil, func(r *abi.RouteRequest) (abi.Empty, error) {
		return abi.Empty{}, impl.DeleteRoute(guest.Context(), r.ClusterName, &r.Route)
	})
}
