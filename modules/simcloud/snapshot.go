package simcloud

import (
	"context"
	"errors"
	"time"

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

// appendInstance encodes in as the API does, for the snapshot.
func appendInstance(b []byte, in *instance) []byte {
	w := jsonWriter{b: append(b, '{')}
	for i, f := range [...]struct{ key, value string }{{"id", in.ID}, {"name", in.Name}, {"zone", in.Zone},
		{"region", in.Region}, {"type", in.Type}, {"state", in.State}} {
		w.key(f.key, i == 0)
		w.str(f.value)
	}
	w.key("addresses", false)
	w.raw("[")
	for i, a := range in.Addresses {
		if i > 0 {
			w.raw(",")
		}
		w.raw("{")
		w.key("type", true)
		w.str(a.Type)
		w.key("address", false)
		w.str(a.Address)
		w.raw("}")
	}
	w.raw("]")
	if in.Labels != nil { // absent decodes to nil, as the API's answer did
		w.key("labels", false)
		w.stringMap(in.Labels)
	}
	w.raw("}")
	return w.b
}

// cachedInstance decodes a snapshot entry, or reports why there is none:
// cache.ErrNotListed sends the caller to the cloud.
func cachedInstance(raw []byte, err error) (*instance, error) {
	if err != nil {
		return nil, err
	}
	in := new(instance)
	if err := in.UnmarshalJSON(raw); err != nil {
		return nil, errors.New("simcloud: decoding an instance from the snapshot: " + err.Error())
	}
	return in, nil
}
