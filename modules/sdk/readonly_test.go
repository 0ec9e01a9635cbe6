package sdk

import (
	"slices"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
)

// TestReadOnlyMark: MarkReadOnly adds abi.HeaderReadOnly with its one
// value (ABI revision 5), a revision 5 host gets it on every request, and
// on an older host, which refuses the mark unsent as an unknown reserved
// header, the request is sent again unmarked, and later ones unmarked from
// the start; unmarked requests and other refusals are left alone.
func TestReadOnlyMark(t *testing.T) {
	marked := func() *abi.HTTPRequest {
		req := &abi.HTTPRequest{Method: "POST", URL: "https://ec2.example/", Headers: []abi.Header{{Name: "Content-Type", Value: "x"}}}
		MarkReadOnly(req)
		return req
	}
	if h := marked().Headers; len(h) != 2 || h[1] != (abi.Header{Name: abi.HeaderReadOnly, Value: abi.ReadOnlyValue}) {
		t.Fatalf("marked headers %v", h)
	}
	isMarked := func(req *abi.HTTPRequest) bool {
		return slices.Contains(req.Headers, abi.Header{Name: abi.HeaderReadOnly, Value: abi.ReadOnlyValue})
	}
	// host answers as a host of the revision given would.
	host := func(revision int, sent *[]bool) func(*abi.HTTPRequest) (*abi.HTTPResponse, error) {
		return func(req *abi.HTTPRequest) (*abi.HTTPResponse, error) {
			*sent = append(*sent, isMarked(req))
			if req.URL == "https://elsewhere.example/" {
				return nil, &HTTPError{Msg: "denied: destination not allowed"}
			}
			if isMarked(req) && revision < 5 {
				return nil, &HTTPError{Msg: "denied: header Wasmccm-Read-Only is reserved for the host and unknown to it"}
			}
			return &abi.HTTPResponse{StatusCode: 200}, nil
		}
	}
	for _, c := range []struct {
		revision int
		want     []bool // marked or not, each request the host saw
	}{
		{5, []bool{true, true, false}},
		{4, []bool{true, false, false, false}},
	} {
		hostLacksReadOnly = false
		var sent []bool
		send := host(c.revision, &sent)
		for _, req := range []*abi.HTTPRequest{marked(), marked(), {Method: "GET", URL: "https://ec2.example/"}} {
			if resp, err := sendMarkedIfKnown(req, send); err != nil || resp.StatusCode != 200 {
				t.Fatalf("revision %d: %v %v", c.revision, resp, err)
			}
		}
		if !slices.Equal(sent, c.want) {
			t.Errorf("revision %d host saw marks %v, want %v", c.revision, sent, c.want)
		}
	}
	hostLacksReadOnly = false
	var sent []bool
	req := marked()
	req.URL = "https://elsewhere.example/"
	if _, err := sendMarkedIfKnown(req, host(5, &sent)); err == nil || len(sent) != 1 || hostLacksReadOnly {
		t.Errorf("another refusal: err %v after %d requests, host taken as lacking the mark: %v; want the refusal, once", err, len(sent), hostLacksReadOnly)
	}
	hostLacksReadOnly = false
}
