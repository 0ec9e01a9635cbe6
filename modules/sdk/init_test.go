package sdk

import (
	"context"
	"errors"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
)

type recordingProvider struct {
	cluster string
	config  []byte
	err     error
}

func (p *recordingProvider) Init(_ context.Context, cluster string, config []byte) error {
	p.cluster, p.config = cluster, config
	return p.err
}

// TestInitialize exercises the init export's body: the request reaches the
// registered provider, and its refusal or absence is a StatusError.
func TestInitialize(t *testing.T) {
	in := abi.Marshal(nil, &abi.InitRequest{ClusterName: "prod", Config: []byte(`{"a":1}`)})
	t.Cleanup(func() { provider = nil })

	provider = nil
	if o, _ := abi.DecodeResult(initialize(in), nil); o.Status != abi.StatusError || o.Message != string(errNoProvider) {
		t.Fatalf("without a provider: %+v", o)
	}

	p := &recordingProvider{}
	Set(p)
	if o, err := abi.DecodeResult(initialize(in), nil); err != nil || o.Status != abi.StatusOK {
		t.Fatalf("init: %+v %v", o, err)
	}
	if p.cluster != "prod" || string(p.config) != `{"a":1}` {
		t.Fatalf("provider saw %q %q", p.cluster, p.config)
	}

	p.err = errors.New("endpoint is required")
	if o, _ := abi.DecodeResult(initialize(in), nil); o.Status != abi.StatusError || o.Message != "endpoint is required" {
		t.Fatalf("refused config: %+v", o)
	}
}
