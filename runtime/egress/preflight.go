package egress

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials"
)

// newRequest builds the request req asks for, to u (already checked
// against the allowlist), and makes every check the host would otherwise
// make only while sending it: the method (checkMethod), each header's
// name and value, the read-only mark's method, and what the reserved
// headers ask
// (credentials.Authenticator.Authorize). A request
// refused here is refused before it takes from the rate budget, so that a
// module cannot spend the budget, shared by every module generation, on
// requests that are never sent.
func (h *Client) newRequest(ctx context.Context, req *abi.HTTPRequest, u *url.URL) (*http.Request, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if err := checkMethod(method); err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return nil, err
	}
	for _, hd := range req.Headers {
		if !httpguts.ValidHeaderFieldName(hd.Name) {
			return nil, fmt.Errorf("header name %q is not a valid header name", hd.Name)
		}
		if !httpguts.ValidHeaderFieldValue(hd.Value) {
			return nil, fmt.Errorf("header %s: the value contains a control character", hd.Name)
		}
		if strings.EqualFold(hd.Name, abi.HeaderReadOnly) {
			// Read by the coalescing (coalesceKey), never sent.
			if hd.Value != abi.ReadOnlyValue {
				return nil, &deniedError{fmt.Sprintf("header %s must be %q", abi.HeaderReadOnly, abi.ReadOnlyValue)}
			}
			if !credentials.ReadOnlyMethod(req.Method) {
				return nil, &deniedError{fmt.Sprintf("header %s is for a POST or QUERY, not %s", abi.HeaderReadOnly, req.Method)}
			}
			continue
		}
		hreq.Header.Add(hd.Name, hd.Value)
	}
	if h.auth != nil {
		if err := h.auth.Authorize(method, hreq.Header, hreq.URL); err != nil {
			return nil, err
		}
	}
	return hreq, nil
}

// checkMethod refuses the methods the Fetch standard forbids: TRACE and
// TRACK make the server echo the request, credentials included, and
// CONNECT turns the origin into a tunnel to anywhere.
func checkMethod(method string) error {
	for _, forbidden := range []string{"TRACE", "TRACK", "CONNECT"} {
		if strings.EqualFold(method, forbidden) {
			return &deniedError{fmt.Sprintf("method %s is forbidden", method)}
		}
	}
	return nil
}
