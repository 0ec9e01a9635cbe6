package provider

import (
	"sync/atomic"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// authEvents turns the host's reports of failed credentials into Events.
// The host reports each credential at most once a minute, so a module
// that retries in every call cannot flood the Pod's Events; it also
// reports guest code it stopped waiting for. The module is made before
// its Cloud, hence the pointer filled in afterwards.
type authEvents struct{ cloud atomic.Pointer[Cloud] }

// hostConfig is cfg's host configuration for the module labelled name,
// with failures reported to a.
func (a *authEvents) hostConfig(cfg *cloudconfig.Config, name string) host.Config {
	hc := HostConfig(cfg, name)
	hc.Credentials.OnAuthFailure = a.report
	hc.OnStuck = a.stuck
	return hc
}

func (a *authEvents) stuck(what string) {
	if c := a.cloud.Load(); c != nil {
		c.events.emit(events.ModuleCodeStuck, "guest code in "+what+" ran on past its deadline; the host stopped waiting for it and leaves its instance until it returns")
	}
}

func (a *authEvents) report(_ string, err error) {
	if c := a.cloud.Load(); c != nil {
		c.events.emit(events.CloudAuthFailed, err.Error())
	}
}
