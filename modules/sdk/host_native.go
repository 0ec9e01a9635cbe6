//go:build !wasip1

package sdk

import (
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// Imports returns the Host backed by the wasmccm host functions. Outside a
// module there are none: every call fails with ErrNoHost. Native callers
// pass a Host from package sdk/native instead.
func Imports() Host { return noHost{} }

// ErrNoHost is returned by Imports() outside a wasm module.
const ErrNoHost = sdkError("sdk: host functions exist only inside a wasm module; use a Host from package sdk/native to run a provider natively")

type noHost struct{}

func (noHost) HTTP(*abi.HTTPRequest) (*abi.HTTPResponse, error)    { return nil, ErrNoHost }
func (noHost) Credential(string) (string, error)                   { return "", ErrNoHost }
func (noHost) Log(abi.LogLevel, string)                            {}
func (noHost) LogEnabled(abi.LogLevel) bool                        { return false }
func (noHost) StateGet(string, time.Duration, bool) ([]byte, bool) { return nil, false }
func (noHost) StateSet(string, []byte) error                       { return ErrNoHost }
func (noHost) StateDelete(string)                                  {}
