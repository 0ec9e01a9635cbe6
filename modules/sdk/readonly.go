package sdk

import (
	"errors"
	"slices"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
)

// MarkReadOnly marks req as a request that changes nothing in the cloud,
// a POST of a query API's Describe action say, with abi.HeaderReadOnly
// (ABI revision 5): the host may then answer it with the response of an
// identical request already in flight, as it does for GETs. Mark only a
// POST or QUERY that reads: the host refuses the mark on other methods,
// and a marked POST that writes may be sent once for several identical
// calls.
// On a host before revision 5, which refuses the mark unsent, the request
// is sent again unmarked, and so are the instance's later ones.
func MarkReadOnly(req *abi.HTTPRequest) {
	req.Headers = append(req.Headers, abi.Header{Name: abi.HeaderReadOnly, Value: abi.ReadOnlyValue})
}

// hostLacksReadOnly is set once the host has refused the read-only mark
// as a reserved header it does not know.
var hostLacksReadOnly bool

// sendMarkedIfKnown performs req with send, and again without its
// read-only mark when the host refuses the mark as unknown; after that
// refusal, marks are left out from the start.
func sendMarkedIfKnown(req *abi.HTTPRequest, send func(*abi.HTTPRequest) (*abi.HTTPResponse, error)) (*abi.HTTPResponse, error) {
	i := slices.IndexFunc(req.Headers, func(h abi.Header) bool { return strings.EqualFold(h.Name, abi.HeaderReadOnly) })
	if i < 0 {
		return send(req)
	}
	if !hostLacksReadOnly {
		resp, err := send(req)
		var herr *HTTPError
		if !errors.As(err, &herr) || !refusesReadOnly(herr.Msg) {
			return resp, err
		}
		hostLacksReadOnly = true
	}
	unmarked := *req
	unmarked.Headers = slices.Delete(slices.Clone(req.Headers), i, i+1)
	return send(&unmarked)
}

// refusesReadOnly recognizes the refusal of a host before revision 5,
// which denies any reserved header it does not know ("denied: header
// Wasmccm-Read-Only is reserved for the host and unknown to it").
func refusesReadOnly(msg string) bool {
	return strings.HasPrefix(msg, "denied: ") && strings.Contains(msg, abi.HeaderReadOnly) && strings.Contains(msg, "unknown")
}
