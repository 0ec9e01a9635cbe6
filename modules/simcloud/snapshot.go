package simcloud

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk/cache"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// Instances are looked up in a snapshot of the whole listing (GET
// /v1/instances), kept in the host's shared state and shared by all of the
// module's instances, so that the controllers' lookups of many Nodes cost
// one request per instanceCacheMaxAge instead of one each. An instance the
// snapshot lacks is asked for directly: only the cloud's own answer to
// that question makes it gone.

// defaultInstanceCacheMaxAge is how old the snapshot may be by default.
const defaultInstanceCacheMaxAge = 10 * time.Second

func (p *Provider) newInstanceSnapshot() cache.Snapshot {
	return cache.Snapshot{Host: p.host, Prefix: "simcloud/instances", List: p.snapshotInstances}
}

// snapshotInstances lists every instance: the API has one page. The
// listing is decoded one instance at a time, each encoded for the snapshot
// at its exact size, so that a module without a collector, which keeps
// all it allocates until its instance is recycled, holds the listing
// about twice (the answer and the entries) rather than several times.
func (p *Provider) snapshotInstances(ctx context.Context, _ int) (*cache.Page, error) {
	page := &cache.Page{Total: -1}
	var scratch []byte
	stream := &instanceStream{each: func(in *instance) error {
		scratch = appendInstance(scratch[:0], in)
		page.Items = append(page.Items, cache.Item{ID: in.ID, Name: in.Name, Value: bytes.Clone(scratch)})
		return nil
	}}
	if _, err := p.api.Do(ctx, &rest.Request{What: "listing instances", Method: "GET", Path: "/v1/instances", Into: stream}); err != nil {
		return nil, err
	}
	// A missing or null body decodes to nothing; only an empty array says
	// there are no instances.
	if !stream.listed {
		return nil, errors.New("simcloud: listing instances: GET /v1/instances: the cloud answered 200 without a list")
	}
	return page, nil
}

// Snapshot entries are in the ABI's binary encoding rather than the API's
// JSON: every lookup decodes one, and in a module each loop iteration
// also counts down the host's deadline budget, which a length-prefixed
// encoding, copied rather than scanned, mostly avoids.

// appendInstance encodes in for the snapshot.
func appendInstance(b []byte, in *instance) []byte {
	e := abi.NewEncoder(b)
	for _, s := range [...]string{in.ID, in.Name, in.Zone, in.Region, in.Type, in.State} {
		e.String(s)
	}
	e.Uint(uint64(len(in.Addresses)))
	for _, a := range in.Addresses {
		e.String(a.Type)
		e.String(a.Address)
	}
	e.StringMap(in.Labels)
	return e.Bytes()
}

// decodeInstance reads what appendInstance wrote.
func decodeInstance(raw []byte) (*instance, error) {
	d := abi.NewDecoder(raw)
	in := new(instance)
	for _, s := range [...]*string{&in.ID, &in.Name, &in.Zone, &in.Region, &in.Type, &in.State} {
		*s = d.String()
	}
	if n := d.Count(2); n > 0 {
		in.Addresses = make([]address, n)
		for i := range in.Addresses {
			in.Addresses[i] = address{Type: d.String(), Address: d.String()}
		}
	}
	in.Labels = d.StringMap()
	return in, d.Finish()
}

// cachedInstance decodes a snapshot entry, or reports why there is none:
// cache.ErrNotListed sends the caller to the cloud.
func cachedInstance(raw []byte, err error) (*instance, error) {
	if err != nil {
		return nil, err
	}
	in, err := decodeInstance(raw)
	if err != nil {
		return nil, errors.New("simcloud: decoding an instance from the snapshot: " + err.Error())
	}
	return in, nil
}
