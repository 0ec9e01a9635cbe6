package simcloud

import (
	"context"
	"errors"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk/cache"
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

// snapshotInstances lists every instance: the API has one page.
func (p *Provider) snapshotInstances(ctx context.Context, _ int) (*cache.Page, error) {
	list, err := p.listInstances(ctx, "listing instances")
	if err != nil {
		return nil, err
	}
	// A missing or null body decodes to nil; only an empty array says
	// there are no instances.
	if list == nil {
		return nil, errors.New("simcloud: listing instances: GET /v1/instances: the cloud answered 200 without a list")
	}
	page := &cache.Page{Items: make([]cache.Item, 0, len(list)), Total: -1}
	for i := range list {
		in := &list[i]
		page.Items = append(page.Items, cache.Item{ID: in.ID, Name: in.Name, Value: appendInstance(nil, in)})
	}
	return page, nil
}

// Snapshot entries are in the ABI's binary encoding rather than the API's
// JSON: every lookup decodes one, and in a module each loop iteration
// costs a trip out of the guest's code (the host's deadline check), which
// a length-prefixed encoding, copied rather than scanned, mostly avoids.

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
