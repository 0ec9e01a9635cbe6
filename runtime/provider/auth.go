package provider

import (
	"sync/atomic"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// authEvents turns the host's reports of failed credentials into Events.
// The host reports each credential at most once a minute, so a module
// that retries in every call cannot flood the Pod's Events. The module is
// made before its Cloud, hence the pointer filled in afterwards.
type authEvents struct{ cloud atomic.Pointer[Cloud] }

// hostConfig is cfg's host configuration for the module labelled name,
// with failures reported to a.
func (a *authEvents) hostConfig(cfg *cloudconfig.Config, name string) host.Config {
	hc := HostConfig(cfg, name)
	hc.Credentials.OnAuthFailure = a.report
	return hc
}

func (a *authEvents) report(_ string, err error) {
	if c := a.cloud.Load(); c != nil {
		c.events.emit(events.CloudAuthFailed, err.Error())
	}
}
