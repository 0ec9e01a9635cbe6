package digitalocean

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// The API objects, reduced to the fields this provider reads. The API's
// full types are godo's; these are kept small because decoding runs
// inside the guest.

type droplet struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	SizeSlug string `json:"size_slug"`
	Region   struct {
		Slug string `json:"slug"`
	} `json:"region"`
	Networks struct {
		V4 []dropletNetwork `json:"v4"`
		V6 []dropletNetwork `json:"v6"`
	} `json:"networks"`
}

type dropletNetwork struct {
	IPAddress string `json:"ip_address"`
	Type      string `json:"type"` // public or private
}

// address returns the droplet's first address of the type in nets, as
// godo's PrivateIPv4, PublicIPv4 and PublicIPv6 (which the official CCM
// uses) pick it; "" when it has none.
func address(nets []dropletNetwork, typ string) string {
	for _, n := range nets {
		if n.Type == typ {
			return n.IPAddress
		}
	}
	return ""
}

// loadBalancer is a load balancer as the API answers it, and lbRequest
// what the provider asks for; the fields they share compare directly.
type loadBalancer struct {
	ID     string `json:"id"`
	IP     string `json:"ip"`
	IPv6   string `json:"ipv6"`
	Status string `json:"status"`
	Region *struct {
		Slug string `json:"slug"`
	} `json:"region"`
	Tags []string `json:"tags"`
	lbSettings
}

type lbRequest struct {
	Region  string   `json:"region,omitempty"`
	VPCUUID string   `json:"vpc_uuid,omitempty"`
	IP      string   `json:"ip,omitempty"`
	Tags    []string `json:"tags,omitempty"`
	lbSettings
}

// lbSettings are the settings the provider sets and compares.
type lbSettings struct {
	Name                         string           `json:"name,omitempty"`
	Algorithm                    string           `json:"algorithm,omitempty"`
	SizeSlug                     string           `json:"size,omitempty"`
	SizeUnit                     uint32           `json:"size_unit,omitempty"`
	Type                         string           `json:"type,omitempty"`
	Network                      string           `json:"network,omitempty"`
	NetworkStack                 string           `json:"network_stack,omitempty"`
	ForwardingRules              []forwardingRule `json:"forwarding_rules,omitempty"`
	HealthCheck                  *healthCheck     `json:"health_check,omitempty"`
	StickySessions               *stickySessions  `json:"sticky_sessions,omitempty"`
	DropletIDs                   []int64          `json:"droplet_ids,omitempty"`
	RedirectHTTPToHTTPS          bool             `json:"redirect_http_to_https,omitempty"`
	EnableProxyProtocol          bool             `json:"enable_proxy_protocol,omitempty"`
	EnableBackendKeepalive       bool             `json:"enable_backend_keepalive,omitempty"`
	DisableLetsEncryptDNSRecords *bool            `json:"disable_lets_encrypt_dns_records,omitempty"`
	HTTPIdleTimeoutSeconds       *uint64          `json:"http_idle_timeout_seconds,omitempty"`
	Firewall                     *firewall        `json:"firewall,omitempty"`
	SubnetUUID                   string           `json:"subnet_uuid,omitempty"`
}

type forwardingRule struct {
	EntryProtocol  string `json:"entry_protocol,omitempty"`
	EntryPort      int    `json:"entry_port,omitempty"`
	TargetProtocol string `json:"target_protocol,omitempty"`
	TargetPort     int    `json:"target_port,omitempty"`
	CertificateID  string `json:"certificate_id,omitempty"`
	TLSPassthrough bool   `json:"tls_passthrough,omitempty"`
}

type healthCheck struct {
	Protocol               string `json:"protocol,omitempty"`
	Port                   int    `json:"port,omitempty"`
	Path                   string `json:"path,omitempty"`
	CheckIntervalSeconds   int    `json:"check_interval_seconds,omitempty"`
	ResponseTimeoutSeconds int    `json:"response_timeout_seconds,omitempty"`
	HealthyThreshold       int    `json:"healthy_threshold,omitempty"`
	UnhealthyThreshold     int    `json:"unhealthy_threshold,omitempty"`
	ProxyProtocol          *bool  `json:"proxy_protocol,omitempty"`
}

type stickySessions struct {
	Type             string `json:"type,omitempty"`
	CookieName       string `json:"cookie_name,omitempty"`
	CookieTTLSeconds int    `json:"cookie_ttl_seconds,omitempty"`
}

type firewall struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// get fetches path and decodes the object under key. It returns
// found=false only for the API's own not_found answer.
func get[T any](ctx context.Context, p *Provider, what, path, key string) (*T, bool, error) {
	var body map[string]json.RawMessage
	_, err := p.api.Do(ctx, &rest.Request{What: what, Method: "GET", Path: path, NotFound: true, Into: &body})
	if errors.Is(err, sdk.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v := new(T)
	if err := rest.Member(body, key, v); err != nil {
		return nil, false, errors.New("digitalocean: " + what + ": " + err.Error())
	}
	return v, true, nil
}

// perPage is the page size, the official CCM's: droplets are large
// objects, and a module decodes a whole page at once.
const perPage = "50"

// listAll fetches every page of /v2/<kind> with the given filters. Every
// page must carry meta.total, and the pages together that total: a
// listing with gaps is an error, never a shorter list, since what it
// lacks would look gone.
func listAll[T any](ctx context.Context, p *Provider, what, kind string, filters ...rest.Param) ([]T, error) {
	var all []T
	for page := 1; ; {
		items, next, total, err := listPage[T](ctx, p, what, kind, page, filters)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == 0 {
			if total != len(all) {
				return nil, errors.New("digitalocean: " + what + ": the API announced " + strconv.Itoa(total) +
					" entries and listed " + strconv.Itoa(len(all)) + "; the listing is incomplete")
			}
			return all, nil
		}
		page = next
	}
}

// listPage fetches one page of /v2/<kind> and returns its objects, the
// next page's number (0 after the last, as links.pages.next says) and
// meta.total.
func listPage[T any](ctx context.Context, p *Provider, what, kind string, page int, filters []rest.Param) (items []T, next, total int, err error) {
	var body struct {
		Links *struct {
			Pages *struct {
				Next string `json:"next"`
			} `json:"pages"`
		}
		Meta *struct {
			Total *int `json:"total"`
		}
	}
	var raw map[string]json.RawMessage
	query := append([]rest.Param{{Name: "page", Value: strconv.Itoa(page)}, {Name: "per_page", Value: perPage}}, filters...)
	if _, err := p.api.Do(ctx, &rest.Request{What: what, Method: "GET", Path: "/v2/" + kind, Query: query, Into: &raw}); err != nil {
		return nil, 0, 0, err
	}
	fail := func(msg string) ([]T, int, int, error) {
		return nil, 0, 0, errors.New("digitalocean: " + what + ": " + msg)
	}
	if err := rest.Member(raw, kind, &items); err != nil {
		return fail(err.Error())
	}
	for key, v := range map[string]any{"links": &body.Links, "meta": &body.Meta} {
		if r, ok := raw[key]; ok {
			if err := json.Unmarshal(r, v); err != nil {
				return fail("decoding " + strconv.Quote(key) + ": " + err.Error())
			}
		}
	}
	if body.Meta == nil || body.Meta.Total == nil {
		return fail("the API's answer carries no meta.total, so the listing cannot be known complete")
	}
	if body.Links != nil && body.Links.Pages != nil && body.Links.Pages.Next != "" {
		n, ok := pageOf(body.Links.Pages.Next)
		if !ok || n <= page {
			return fail("links.pages.next " + strconv.Quote(body.Links.Pages.Next) + " does not name a later page")
		}
		next = n
	}
	return items, next, *body.Meta.Total, nil
}

// pageOf reads the page parameter of a links.pages URL.
func pageOf(link string) (int, bool) {
	_, query, _ := strings.Cut(link, "?")
	for param := range strings.SplitSeq(query, "&") {
		if v, ok := strings.CutPrefix(param, "page="); ok {
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
	}
	return 0, false
}
