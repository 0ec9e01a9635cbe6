package sdk

import "github.com/wasmccm/wasmccm/abi"

// Host is what a provider may use of the world outside its module: HTTP to
// the destinations the operator allowed, the credentials it was granted,
// and the CCM's log. Inside a module it is Imports(); natively, a value from
// package sdk/native.
type Host interface {
	// HTTP performs one request. A non-nil error means no response was
	// received (destination not allowed, timeout, transport failure); HTTP
	// error statuses are returned as responses.
	HTTP(req *abi.HTTPRequest) (*abi.HTTPResponse, error)
	// Credential returns the value of a granted credential.
	Credential(name string) (string, error)
	// Log records msg at level in the CCM's log, tagged with the module.
	Log(level abi.LogLevel, msg string)
	// LogEnabled reports whether Log at level would record anything.
	LogEnabled(level abi.LogLevel) bool
}

// HTTPError is returned by Host.HTTP when the host got no response.
type HTTPError struct{ Msg string }

func (e *HTTPError) Error() string { return "http: " + e.Msg }

// CredentialError is returned by Host.Credential.
type CredentialError struct {
	Name  string
	Errno abi.Errno
}

func (e *CredentialError) Error() string { return "credential " + e.Name + ": " + e.Errno.Error() }
