//go:build wasip1

//lint:file-ignore U1000 these functions are called by the host through //go:wasmexport.

package routes

import "github.com/wasmccm/wasmccm/modules/sdk/internal/guest"

//go:wasmexport wasmccm_list_routes
func exportListRoutes(ptr, size uint32) uint64 { return guest.Export(ptr, size, listRoutes) }

//go:wasmexport wasmccm_create_route
func exportCreateRoute(ptr, size uint32) uint64 { return guest.Export(ptr, size, createRoute) }

//go:wasmexport wasmccm_delete_route
func exportDeleteRoute(ptr, size uint32) uint64 { return guest.Export(ptr, size, deleteRoute) }
