package digitalocean

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/modules/sdk/cache"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// Droplets are looked up in a snapshot of every droplet, kept in the
// host's shared state: one paginated GET /v2/droplets at most every
// dropletCacheMaxAge serves every lookup by ID, name or address, for all
// of the module's instances. The official CCM reads each droplet on each
// call instead; with a snapshot the cluster spends a fraction of the
// account's rate limit.
//
// A droplet the snapshot lacks is read directly (GET /v2/droplets/{id},
// or GET /v2/droplets?name= for a name), and only that read's not_found,
// or an empty answer to the search by name, says it is gone: a droplet
// created since the listing is found, and a listing that missed one
// deletes nothing.

// addressesKey is the snapshot's derived map of droplet addresses to
// droplet IDs, through which a Node named after its address is found.
const addressesKey = "addresses"

// listDroplets lists one page of droplets, each kept in its reduced JSON,
// with that page's part of the address map.
func (p *Provider) listDroplets(ctx context.Context, page int) (*cache.Page, error) {
	droplets, next, total, err := listPage[droplet](ctx, p, "listing droplets", "droplets", page, nil)
	if err != nil {
		return nil, err
	}
	pg := &cache.Page{Items: make([]cache.Item, 0, len(droplets)), Next: next, Total: total}
	var addresses strings.Builder
	for i := range droplets {
		d := &droplets[i]
		raw, err := json.Marshal(d)
		if err != nil {
			return nil, errors.New("digitalocean: listing droplets: encoding droplet " + strconv.FormatInt(d.ID, 10) + ": " + err.Error())
		}
		id := strconv.FormatInt(d.ID, 10)
		pg.Items = append(pg.Items, cache.Item{ID: id, Name: d.Name, Value: raw})
		for _, ip := range []string{address(d.Networks.V4, "private"), address(d.Networks.V4, "public"), address(d.Networks.V6, "public")} {
			if ip != "" {
				addresses.WriteString(ip + " " + id + "\n")
			}
		}
	}
	pg.Derived = map[string][]byte{addressesKey: []byte(addresses.String())}
	return pg, nil
}

func decodeDroplet(raw []byte) (*droplet, error) {
	d := new(droplet)
	if err := json.Unmarshal(raw, d); err != nil {
		return nil, errors.New("digitalocean: decoding a droplet from the snapshot: " + err.Error())
	}
	return d, nil
}

// dropletByID returns droplet id from the snapshot, or from a direct
// read when the snapshot lacks it; nil only when that read says
// not_found.
func (p *Provider) dropletByID(ctx context.Context, id int64) (*droplet, error) {
	key := strconv.FormatInt(id, 10)
	if p.dropletMaxAge > 0 {
		raw, err := p.droplets.ByID(ctx, key, p.dropletMaxAge)
		if err == nil {
			return decodeDroplet(raw)
		}
		if !errors.Is(err, cache.ErrNotListed) {
			return nil, err
		}
	}
	d, found, err := get[droplet](ctx, p, "getting droplet "+key, "/v2/droplets/"+key, "droplet")
	if err != nil || !found {
		return nil, err
	}
	return d, nil
}

// dropletByName returns the droplet a Node without a provider ID names,
// as the official CCM matches it: by droplet name, or by its private
// IPv4, public IPv4 or public IPv6 address. It looks in the snapshot,
// else searches the API by name; nil only when that search lists none.
func (p *Provider) dropletByName(ctx context.Context, name string) (*droplet, error) {
	if p.dropletMaxAge > 0 {
		raw, err := p.droplets.ByName(ctx, name, p.dropletMaxAge)
		if err == nil {
			return decodeDroplet(raw)
		}
		if !errors.Is(err, cache.ErrNotListed) {
			return nil, err
		}
		if id := p.idOfAddress(ctx, name); id != "" {
			if raw, err := p.droplets.ByID(ctx, id, p.dropletMaxAge); err == nil {
				return decodeDroplet(raw)
			}
		}
	}
	what := "finding droplet " + strconv.Quote(name)
	list, err := listAll[droplet](ctx, p, what, "droplets", rest.Param{Name: "name", Value: name})
	if err != nil {
		return nil, err
	}
	for i := range list {
		if d := &list[i]; matchesName(d, name) {
			return d, nil
		}
	}
	return nil, nil
}

// idOfAddress returns the ID of the droplet with address ip in the
// snapshot, "" when none has it or the snapshot holds no address map.
func (p *Provider) idOfAddress(ctx context.Context, ip string) string {
	raw, err := p.droplets.Derived(ctx, addressesKey, p.dropletMaxAge)
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if addr, id, ok := strings.Cut(line, " "); ok && addr == ip {
			return id
		}
	}
	return ""
}

// matchesName reports whether a Node called name is droplet d.
func matchesName(d *droplet, name string) bool {
	return d.Name == name || name == address(d.Networks.V4, "private") ||
		name == address(d.Networks.V4, "public") || name == address(d.Networks.V6, "public")
}
