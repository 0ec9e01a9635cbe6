package credentials

import (
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/wasmccm/wasmccm/abi"
)

// HeaderAuth sends the value of Key in the header Name, e.g.
// X-Auth-Token.
type HeaderAuth struct {
	// Name is the header, which a request may not set itself.
	Name string `json:"name"`
	// Key is the Secret key that holds its value.
	Key string `json:"key"`
}

func (h *HeaderAuth) keys() []string       { return []string{h.Key} }
func (h *HeaderAuth) secretKeys() []string { return h.keys() }
func (h *HeaderAuth) header() string       { return h.Name }

// validate refuses a header the host reads itself (reserved, Host) or
// that is no header name at all.
func (h *HeaderAuth) validate() []error {
	name := http.CanonicalHeaderKey(h.Name)
	if !httpguts.ValidHeaderFieldName(h.Name) || strings.HasPrefix(name, abi.HeaderPrefix) || name == "Host" {
		return []error{fmt.Errorf("name %q is not a header a credential can be sent in", h.Name)}
	}
	return nil
}

func (h *HeaderAuth) apply(req *http.Request, a *applying) error {
	value, err := a.secret(h.Key)
	if err != nil {
		return err
	}
	a.sent(value)
	req.Header.Set(h.Name, value)
	return nil
}
