package host

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/wasmccm/wasmccm/abi"
)

// newRequest builds the request req asks for, to u (already checked
// against the allowlist), and makes every check the host would otherwise
// make only while sending it: the method (checkMethod), each header's
// name and value, and what the reserved headers ask
// (authenticator.authorize). A request
// refused here is refused before it takes from the rate budget, so that a
// module cannot spend the budget, shared by every module generation, on
// requests that are never sent.
func (h *httpClient) newRequest(ctx context.Context, req *abi.HTTPRequest, u *url.URL) (*http.Request, error) {
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
		if !validHeaderName(hd.Name) {
			return nil, fmt.Errorf("header name %q is not a valid header name", hd.Name)
		}
		if err := validHeaderValue(hd.Value); err != nil {
			return nil, fmt.Errorf("header %s: the value %w", hd.Name, err)
		}
		hreq.Header.Add(hd.Name, hd.Value)
	}
	if h.cfg.auth != nil {
		if _, err := h.cfg.auth.authorize(hreq.Header, hreq.URL); err != nil {
			return nil, err
		}
	}
	return hreq, nil
}
