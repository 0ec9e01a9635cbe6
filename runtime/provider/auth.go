package provider

import (
	"sync/atomic"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmccm/wasmccm/runtime/host"
)

// eventCloudAuthFailed is the reason of the Event on the CCM's Pod when a
// credential cannot be applied to the module's requests: a missing or
// malformed secret, or a failed token exchange. The module's calls fail
// with the same error meanwhile.
const eventCloudAuthFailed = "CloudAuthFailed"

// authEvents turns the host's reports of failed credentials into Events.
// The host reports each credential at most once a minute, so a module
// that retries in every call cannot flood the Pod's Events. The module is
// made before its Cloud, hence the pointer filled in afterwards.
type authEvents struct{ cloud atomic.Pointer[Cloud] }

// hostConfig is cfg's host configuration with failures reported to a.
func (a *authEvents) hostConfig(cfg *Config) host.Config {
	hc := cfg.HostConfig(moduleName(cfg.Module.Path))
	hc.Credentials.OnAuthFailure = a.report
	return hc
}

func (a *authEvents) report(_ string, err error) {
	if c := a.cloud.Load(); c != nil {
		c.events.emit(v1.EventTypeWarning, eventCloudAuthFailed, err.Error())
	}
}
