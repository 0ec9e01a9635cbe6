// Package simcloud is a small simulated cloud: an HTTP API with instances,
// load balancers and routes that the wasmccm provider module can be developed
// and tested against without a real cloud account.
//
// The public API lives under /v1 and requires a bearer token, like a real
// cloud. A separate admin API under /admin, and Go methods on [Cloud] that
// mirror it, let tests and demos create instances, inject faults (latency,
// 5xx errors, 429 throttling, a global rate limit) and read request
// counters, so that controller behaviour under failure can be asserted
// precisely ("no load balancer was created twice", "nothing was deleted").
//
// The wire format is documented in README.md next to this file; response
// bodies are deliberately small and flat because the provider decodes them
// inside a WebAssembly guest, where JSON decoding is comparatively costly.
//
// Typical in-process use:
//
//	cloud := simcloud.New(simcloud.Options{Token: "secret"})
//	srv := httptest.NewServer(cloud.Handler())
//	defer srv.Close()
//	cloud.AddInstance(simcloud.Instance{Name: "node-a"})
//	cloud.SetFault(simcloud.Fault{Route: "POST /v1/loadbalancers", FailNext: 1})
package simcloud
