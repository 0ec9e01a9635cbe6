//go:build wasip1

package sdk

import (
	"strconv"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk/internal/guest"
)

//go:wasmimport wasmccm http_do
func hostHTTPDo(ptr, size uint32) int32

//go:wasmimport wasmccm credential
func hostCredential(ptr, size uint32) int32

//go:wasmimport wasmccm log
func hostLog(level int32, ptr, size uint32)

//go:wasmimport wasmccm log_enabled
func hostLogEnabled(level int32) int32

//go:wasmimport wasmccm take_result
func hostTakeResult(ptr, size uint32) int32

//go:wasmimport wasmccm state_get
func hostStateGet(keyPtr, keySize uint32, maxAgeMillis int64, claim int32) int32

//go:wasmimport wasmccm state_set
func hostStateSet(keyPtr, keySize, valuePtr, valueSize uint32) int32

//go:wasmimport wasmccm state_delete
func hostStateDelete(keyPtr, keySize uint32)

// Imports returns the Host backed by the wasmccm host functions.
func Imports() Host { return imports{} }

type imports struct{}

// Requests and pending results go through reused buffers: one call runs per
// instance at a time, and decoding copies what it keeps, but for an HTTP
// response, which takes the result buffer over.
var requestBuf, resultBuf []byte

func (imports) HTTP(req *abi.HTTPRequest) (*abi.HTTPResponse, error) {
	return sendMarkedIfKnown(req, httpDo)
}

func httpDo(req *abi.HTTPRequest) (*abi.HTTPResponse, error) {
	if len(req.Headers) > abi.MaxRequestHeaders {
		// The host would refuse the message as malformed and end the call.
		return nil, &HTTPError{Msg: "request has " + strconv.Itoa(len(req.Headers)) + " headers, more than the " + strconv.Itoa(abi.MaxRequestHeaders) + " the host accepts"}
	}
	requestBuf = abi.Marshal(requestBuf, req)
	n := hostHTTPDo(guest.AddressOf(requestBuf), uint32(len(requestBuf)))
	raw, err := takeResult(n)
	if err != nil {
		return nil, &HTTPError{Msg: err.Error()}
	}
	// The response keeps raw, its body a slice of it rather than a copy:
	// a listing of thousands of objects is then in the guest once, not
	// twice. The next result needs a buffer of its own.
	resultBuf = nil
	resp := new(abi.HTTPResponse)
	if err := abi.UnmarshalOwning(raw, resp); err != nil {
		return nil, &HTTPError{Msg: "decoding host response: " + err.Error()}
	}
	if resp.Error != "" {
		return nil, &HTTPError{Msg: resp.Error}
	}
	return resp, nil
}

func (imports) Credential(name string) (string, error) {
	requestBuf = append(requestBuf[:0], name...)
	n := hostCredential(guest.AddressOf(requestBuf), uint32(len(requestBuf)))
	raw, err := takeResult(n)
	if err != nil {
		return "", &CredentialError{Name: name, Errno: err.(abi.Errno)}
	}
	return string(raw), nil
}

func (imports) Log(level abi.LogLevel, msg string) {
	requestBuf = append(requestBuf[:0], msg...)
	hostLog(int32(level), guest.AddressOf(requestBuf), uint32(len(requestBuf)))
}

func (imports) LogEnabled(level abi.LogLevel) bool { return hostLogEnabled(int32(level)) == 1 }

func (imports) StateGet(key string, maxAge time.Duration, claim bool) ([]byte, bool) {
	requestBuf = append(requestBuf[:0], key...)
	maxAgeMillis := int64(-1)
	if maxAge >= 0 {
		maxAgeMillis = maxAge.Milliseconds()
	}
	var claimFlag int32
	if claim {
		claimFlag = 1
	}
	raw, err := takeResult(hostStateGet(guest.AddressOf(requestBuf), uint32(len(requestBuf)), maxAgeMillis, claimFlag))
	if err != nil {
		return nil, false
	}
	// resultBuf is reused by the next host call.
	return append([]byte(nil), raw...), true
}

func (imports) StateSet(key string, value []byte) error {
	requestBuf = append(requestBuf[:0], key...)
	if e := hostStateSet(guest.AddressOf(requestBuf), uint32(len(requestBuf)), guest.AddressOf(value), uint32(len(value))); e != 0 {
		return abi.Errno(e)
	}
	return nil
}

func (imports) StateDelete(key string) {
	requestBuf = append(requestBuf[:0], key...)
	hostStateDelete(guest.AddressOf(requestBuf), uint32(len(requestBuf)))
}

// takeResult fetches the pending result announced by a host call's return
// value n, or the Errno it carries.
func takeResult(n int32) ([]byte, error) {
	if n < 0 {
		return nil, abi.Errno(n)
	}
	if cap(resultBuf) < int(n) {
		resultBuf = make([]byte, n)
	}
	resultBuf = resultBuf[:n]
	if n == 0 {
		return resultBuf, nil
	}
	if got := hostTakeResult(guest.AddressOf(resultBuf), uint32(n)); got != n {
		return nil, abi.Errno(got)
	}
	return resultBuf, nil
}
