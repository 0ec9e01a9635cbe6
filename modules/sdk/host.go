package sdk

import (
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// Host is what a provider may use of the world outside its module: HTTP to
// the destinations the operator allowed, authenticated with the
// credentials its requests name, and the CCM's log. Inside a module it is
// Imports(); natively, a value from package sdk/native.
type Host interface {
	// HTTP performs one request. A non-nil error means no response was
	// received (destination not allowed, timeout, transport failure); HTTP
	// error statuses are returned as responses.
	HTTP(req *abi.HTTPRequest) (*abi.HTTPResponse, error)
	// Credential returns the raw value of a credential the operator made
	// readable (credentials.readable). None is by default: a module that
	// holds a secret can publish it, so modules name a credential in their
	// requests instead (abi.HeaderCredential, rest.Client.Credential) and
	// the host applies it.
	Credential(name string) (string, error)
	// Log records msg at level in the CCM's log, tagged with the module.
	Log(level abi.LogLevel, msg string)
	// LogEnabled reports whether Log at level would record anything.
	LogEnabled(level abi.LogLevel) bool

	// StateGet returns the value stored under key in the module's shared
	// state, kept by the host across calls and instances, when it was
	// written at most maxAge ago (any age when maxAge is negative). When
	// there is none and claim is set, the caller is to fill the key:
	// other instances asking with claim wait until it stores the key or
	// its call ends. Package cache builds on it.
	StateGet(key string, maxAge time.Duration, claim bool) ([]byte, bool)
	// StateSet stores value under key; it fails only for a value larger
	// than the host keeps for one key.
	StateSet(key string, value []byte) error
	// StateDelete removes key, so that the next reader fills it again.
	StateDelete(key string)
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
