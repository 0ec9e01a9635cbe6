package hcloud

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk/cache"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// Servers are looked up in a snapshot of every server, kept in the host's
// shared state, as the official CCM's server cache does (mode "all"): one
// paginated GET /servers at most every serverCacheMaxAge serves every
// lookup by ID or name, for all of the module's instances. Without it each
// Node's lookup is a request of its own, and the cluster spends several
// times the official CCM's share of the project's rate limit.
//
// A server the snapshot lacks is read directly (GET /servers/{id}, or by
// name), and only that read's not_found says it is gone: a server created
// since the listing is found, and a listing that missed one deletes
// nothing. The official CCM instead lists everything again on a miss and
// calls a server still unlisted gone; one direct read costs less and
// proves more.

// defaultServerCacheMaxAge is HCLOUD_SERVER_CACHE_TTL's default.
const defaultServerCacheMaxAge = 10 * time.Second

// routeTargetMaxAge is how old a snapshot may be when mapping routes to
// servers (ListRoutes' gateways, CreateRoute's target): a route targets a
// Node that exists, and a server's private address changes rarely. The
// official CCM's route target lookup uses one minute too.
const routeTargetMaxAge = time.Minute

// networkIDMaxAge bounds how long a resolved network name is trusted.
const networkIDMaxAge = time.Hour

// gatewaysKey is the snapshot's derived map of private addresses in the
// configured network to server names, which ListRoutes reads whole.
const gatewaysKey = "gateways"

func (p *Provider) newServerSnapshot() cache.Snapshot {
	return cache.Snapshot{Host: p.host, Prefix: "hcloud/servers", List: p.listServers}
}

// listServers lists one page of servers, each kept reduced (appendServer),
// and derives that page's part of the gateway map of the configured
// network.
func (p *Provider) listServers(ctx context.Context, page int) (*cache.Page, error) {
	servers, next, total, err := listPage[server](ctx, p, "listing servers", "servers", page, false, nil)
	if err != nil {
		return nil, err
	}
	networkID, err := p.network(ctx)
	if err != nil {
		return nil, err
	}
	pg := &cache.Page{Items: make([]cache.Item, 0, len(servers)), Next: next, Total: total}
	var gateways strings.Builder
	for i := range servers {
		s := &servers[i]
		pg.Items = append(pg.Items, cache.Item{ID: strconv.FormatInt(s.ID, 10), Name: s.Name, Value: appendServer(nil, s)})
		for _, pn := range s.PrivateNet {
			if networkID != 0 && pn.Network == networkID {
				gateways.WriteString(pn.IP + " " + s.Name + "\n")
			}
		}
	}
	if networkID != 0 {
		pg.Derived = map[string][]byte{gatewaysKey: []byte(gateways.String())}
	}
	return pg, nil
}

// Snapshot entries are in the ABI's binary encoding rather than JSON:
// every lookup decodes one, and in a module each loop iteration also
// counts down the host's deadline budget, which a length-prefixed
// encoding, copied rather than scanned, mostly avoids;
// encoding/json's reflection costs more still.

// appendServer encodes s for the snapshot.
func appendServer(b []byte, s *server) []byte {
	e := abi.NewEncoder(b)
	e.Int(s.ID)
	e.String(s.Name)
	e.String(s.Status)
	for _, ip := range [...]*publicIP{s.PublicNet.IPv4, s.PublicNet.IPv6} {
		e.Bool(ip != nil)
		if ip != nil {
			e.String(ip.IP)
		}
	}
	e.Uint(uint64(len(s.PrivateNet)))
	for _, pn := range s.PrivateNet {
		e.Int(pn.Network)
		e.String(pn.IP)
	}
	e.String(s.ServerType.Name)
	e.String(s.Location.Name)
	return e.Bytes()
}

// decodeServer reads what appendServer wrote.
func decodeServer(raw []byte) (*server, error) {
	d := abi.NewDecoder(raw)
	s := &server{ID: d.Int(), Name: d.String(), Status: d.String()}
	for _, ip := range [...]**publicIP{&s.PublicNet.IPv4, &s.PublicNet.IPv6} {
		if d.Bool() {
			*ip = &publicIP{IP: d.String()}
		}
	}
	if n := d.Count(2); n > 0 {
		s.PrivateNet = make([]privateNet, n)
		for i := range s.PrivateNet {
			s.PrivateNet[i] = privateNet{Network: d.Int(), IP: d.String()}
		}
	}
	s.ServerType.Name = d.String()
	s.Location.Name = d.String()
	if err := d.Finish(); err != nil {
		return nil, errors.New("hcloud: decoding a server from the snapshot: " + err.Error())
	}
	return s, nil
}

// serverByID returns server id from a snapshot at most maxAge old, or from
// a direct read when the snapshot lacks it; nil only when that read says
// not_found.
func (p *Provider) serverByID(ctx context.Context, id int64, maxAge time.Duration, what string) (*server, error) {
	raw, err := p.fromSnapshot(ctx, p.servers.ByID, strconv.FormatInt(id, 10), maxAge)
	if err == nil {
		return decodeServer(raw)
	}
	if !errors.Is(err, cache.ErrNotListed) {
		return nil, err
	}
	s, found, err := getByID[server](ctx, p, what+": getting server "+strconv.FormatInt(id, 10), "servers", "server", id)
	if err != nil || !found {
		return nil, err
	}
	return s, nil
}

// serverByName returns the server named name, from a snapshot at most
// maxAge old or else from the API's answer to a search by name; nil only
// when that search lists none.
func (p *Provider) serverByName(ctx context.Context, name string, maxAge time.Duration) (*server, error) {
	raw, err := p.fromSnapshot(ctx, p.servers.ByName, name, maxAge)
	if err == nil {
		return decodeServer(raw)
	}
	if !errors.Is(err, cache.ErrNotListed) {
		return nil, err
	}
	what := "finding server " + strconv.Quote(name)
	list, err := listAll[server](ctx, p, what, "servers", rest.Param{Name: "name", Value: name})
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].Name != name {
			return nil, errors.New("hcloud: " + what + ": the API answered with a server named " + strconv.Quote(list[i].Name))
		}
	}
	if len(list) == 0 {
		return nil, nil
	}
	return &list[0], nil
}

// gateways maps private addresses in the configured network to server
// names, from a snapshot at most maxAge old.
func (p *Provider) gateways(ctx context.Context, maxAge time.Duration) (map[string]string, error) {
	if p.serverMaxAge == 0 {
		all, err := cache.Collect(ctx, p.listServers)
		if err != nil {
			return nil, err
		}
		return parseGateways(all.Derived[gatewaysKey]), nil
	}
	raw, err := p.servers.Derived(ctx, gatewaysKey, maxAge)
	if errors.Is(err, cache.ErrNotListed) {
		// Evicted, or a newer listing replaced it meanwhile: list again.
		p.servers.Invalidate()
		raw, err = p.servers.Derived(ctx, gatewaysKey, maxAge)
	}
	if err != nil {
		return nil, err
	}
	return parseGateways(raw), nil
}

func parseGateways(raw []byte) map[string]string {
	byIP := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if ip, name, ok := strings.Cut(line, " "); ok {
			byIP[ip] = name
		}
	}
	return byIP
}

// fromSnapshot looks key up with lookup, or answers cache.ErrNotListed
// when the snapshot is off (serverCacheMaxAge "off"), which sends every
// lookup to the API as HCLOUD_SERVER_CACHE_MODE=off does.
func (p *Provider) fromSnapshot(ctx context.Context, lookup func(context.Context, string, time.Duration) ([]byte, error), key string, maxAge time.Duration) ([]byte, error) {
	if p.serverMaxAge == 0 {
		return nil, cache.ErrNotListed
	}
	return lookup(ctx, key, maxAge)
}

// network returns the configured network's ID, 0 when none is configured.
// A name is resolved once per networkIDMaxAge for all instances.
func (p *Provider) network(ctx context.Context) (int64, error) {
	if p.networkID != 0 || p.cfg.Network == "" {
		return p.networkID, nil
	}
	raw, err := cache.Once(p.host, "hcloud/network/"+p.cfg.Network, networkIDMaxAge, func() ([]byte, error) {
		what := "finding network " + strconv.Quote(p.cfg.Network)
		list, err := listAll[network](ctx, p, what, "networks", rest.Param{Name: "name", Value: p.cfg.Network})
		if err != nil {
			return nil, err
		}
		if len(list) != 1 || list[0].Name != p.cfg.Network {
			return nil, errors.New("hcloud: " + what + ": the API lists " + strconv.Itoa(len(list)) + " networks of that name, want exactly one")
		}
		return []byte(strconv.FormatInt(list[0].ID, 10)), nil
	})
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, errors.New("hcloud: the network ID kept in shared state is not a number: " + err.Error())
	}
	p.networkID = id
	return id, nil
}
