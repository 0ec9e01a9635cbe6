package dofake

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/digitalocean/godo"

	"github.com/wasmccm/wasmccm/examples/faultinject"
)

const token = "do-token"

// client starts a fake and returns the godo client pointed at it.
func client(t *testing.T, opts Options) (*Cloud, *godo.Client) {
	t.Helper()
	opts.Token = token
	cloud := New(opts)
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	return cloud, clientFor(t, srv.URL, token)
}

func clientFor(t *testing.T, url, tok string) *godo.Client {
	t.Helper()
	c, err := godo.New(&http.Client{Transport: bearer(tok)}, godo.SetBaseURL(url+"/"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestDropletPagination: godo's own pagination (links.pages, as the
// official CCM follows it) walks every page, and meta.total counts all.
func TestDropletPagination(t *testing.T) {
	cloud, do := client(t, Options{})
	for i := range 7 {
		tags := []string{}
		if i%2 == 0 {
			tags = []string{"k8s:worker"}
		}
		if _, err := cloud.AddDroplet(Droplet{Name: "node-" + strconv.Itoa(i), Tags: tags}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		list func(*godo.ListOptions) ([]godo.Droplet, *godo.Response, error)
		want int
	}{
		{"all", func(o *godo.ListOptions) ([]godo.Droplet, *godo.Response, error) {
			return do.Droplets.List(context.Background(), o)
		}, 7},
		{"by tag", func(o *godo.ListOptions) ([]godo.Droplet, *godo.Response, error) {
			return do.Droplets.ListByTag(context.Background(), "k8s:worker", o)
		}, 4},
		{"by name", func(o *godo.ListOptions) ([]godo.Droplet, *godo.Response, error) {
			return do.Droplets.ListByName(context.Background(), "node-3", o)
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			opt := &godo.ListOptions{Page: 1, PerPage: 3}
			for pages := 1; ; pages++ {
				list, resp, err := tc.list(opt)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Meta == nil || resp.Meta.Total != tc.want {
					t.Fatalf("meta %+v, want total %d", resp.Meta, tc.want)
				}
				for _, d := range list {
					names = append(names, d.Name)
				}
				if resp.Links == nil || resp.Links.IsLastPage() {
					break
				}
				cur, err := resp.Links.CurrentPage()
				if err != nil || cur != pages {
					t.Fatalf("current page %d, %v; want %d", cur, err, pages)
				}
				opt.Page = cur + 1
			}
			if len(names) != tc.want || len(slices.Compact(slices.Sorted(slices.Values(names)))) != tc.want {
				t.Fatalf("listed %v, want %d distinct droplets", names, tc.want)
			}
		})
	}
}

// TestRegions: godo lists the regions the official CCM checks its REGION
// against.
func TestRegions(t *testing.T) {
	_, do := client(t, Options{})
	list, _, err := do.Regions.List(context.Background(), &godo.ListOptions{PerPage: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(Regions) || !slices.ContainsFunc(list, func(r godo.Region) bool { return r.Slug == "fra1" && r.Available }) {
		t.Fatalf("regions %+v", list)
	}
}

// TestErrorsAndRate: a missing droplet is godo's ErrorResponse with the
// API's id, every answer carries the rate headers godo parses, a wrong
// token is 401, and an empty bucket is 429 when enforced.
func TestErrorsAndRate(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cloud, do := client(t, Options{RateLimit: 3, EnforceRateLimit: true, Now: func() time.Time { return now }})
	d, err := cloud.AddDroplet(Droplet{Name: "node-a", Region: "ams3", Size: "s-1vcpu-2gb", Status: "off"})
	if err != nil {
		t.Fatal(err)
	}
	got, resp, err := do.Droplets.Get(context.Background(), d.ID)
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := got.PrivateIPv4()
	pub, _ := got.PublicIPv4()
	v6, _ := got.PublicIPv6()
	if got.Name != "node-a" || got.SizeSlug != "s-1vcpu-2gb" || got.Region.Slug != "ams3" || got.Status != "off" || priv == "" || pub == "" || v6 == "" {
		t.Fatalf("droplet %+v (%s %s %s)", got, priv, pub, v6)
	}
	if resp.Rate.Limit != 3 || resp.Rate.Remaining != 2 || resp.Rate.Reset.Unix() != now.Add(20*time.Minute).Unix() {
		t.Fatalf("rate %+v", resp.Rate)
	}

	_, resp, err = do.Droplets.Get(context.Background(), 4242)
	var e *godo.ErrorResponse
	if !errors.As(err, &e) || resp.StatusCode != 404 || e.Message == "" || e.RequestID == "" {
		t.Fatalf("missing droplet: %v (%T)", err, err)
	}

	if _, resp, err = do.Droplets.Get(context.Background(), d.ID); err != nil || resp.Rate.Remaining != 0 {
		t.Fatalf("last token: %v, %+v", err, resp.Rate)
	}
	_, resp, err = do.Droplets.Get(context.Background(), d.ID)
	if !errors.As(err, &e) || resp.StatusCode != 429 || resp.Rate.Remaining != 0 || cloud.Throttled() != 1 {
		t.Fatalf("spent bucket: %v, %+v", err, resp.Rate)
	}
	now = now.Add(20 * time.Minute)
	if _, _, err := do.Droplets.Get(context.Background(), d.ID); err != nil {
		t.Fatalf("after a refill: %v", err)
	}

	srv := httptest.NewServer(New(Options{Token: token}).Handler())
	defer srv.Close()
	_, resp, err = clientFor(t, srv.URL, "wrong").Droplets.List(context.Background(), nil)
	if !errors.As(err, &e) || resp.StatusCode != 401 || resp.Rate.Limit != 5000 {
		t.Fatalf("wrong token: %v", err)
	}
}

// TestNotFoundID: the 404 body is the API's {"id":"not_found",...}, which
// a client can tell from a proxy's 404.
func TestNotFoundID(t *testing.T) {
	cloud := New(Options{})
	srv := httptest.NewServer(cloud.Handler())
	defer srv.Close()
	for _, path := range []string{"/v2/droplets/99", "/v2/load_balancers/nope", "/v2/no-such-endpoint"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var e errorBody
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 404 || e.ID != "not_found" || e.Message == "" {
			t.Errorf("%s: %d %+v %v", path, resp.StatusCode, e, err)
		}
	}
}

// TestLoadBalancerLifecycle: created "new" without an address, active
// after the configured reads, updated in place keeping its tags, tagged
// through the tags API, validated as the API does, then deleted.
func TestLoadBalancerLifecycle(t *testing.T) {
	cloud, do := client(t, Options{ActivateAfterReads: 2})
	ctx := context.Background()
	d1, _ := cloud.AddDroplet(Droplet{Name: "node-1"})
	d2, _ := cloud.AddDroplet(Droplet{Name: "node-2", Tags: []string{"pool"}})
	req := &godo.LoadBalancerRequest{
		Name: "a1234", Region: "fra1", SizeUnit: 2, Tags: []string{"k8s:cluster-1", "wasmccm:service-uid:u-1"},
		ForwardingRules: []godo.ForwardingRule{{EntryProtocol: "https", EntryPort: 443, TargetProtocol: "http", TargetPort: 30443, CertificateID: "cert-1"},
			{EntryProtocol: "tcp", EntryPort: 80, TargetProtocol: "tcp", TargetPort: 30080}},
		HealthCheck:    &godo.HealthCheck{Protocol: "tcp", Port: 30080, CheckIntervalSeconds: 3, ResponseTimeoutSeconds: 5, HealthyThreshold: 5, UnhealthyThreshold: 3},
		StickySessions: &godo.StickySessions{Type: "cookies", CookieName: "c", CookieTtlSeconds: 60},
		DropletIDs:     []int{d1.ID}, RedirectHttpToHttps: true, EnableProxyProtocol: true, Algorithm: "least_connections",
	}
	lb, _, err := do.LoadBalancers.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if lb.Status != "new" || lb.IP != "" || lb.SizeUnit != 2 || lb.Algorithm != "least_connections" || !lb.RedirectHttpToHttps || !lb.EnableProxyProtocol {
		t.Fatalf("created %+v", lb)
	}
	for i, want := range []string{"new", "new", "active"} {
		got, _, err := do.LoadBalancers.Get(ctx, lb.ID)
		if err != nil || got.Status != want {
			t.Fatalf("read %d: %v %v, want %s", i+1, got, err, want)
		}
		if want == "active" && got.IP == "" {
			t.Fatal("an active load balancer has no IP")
		}
	}
	list, resp, err := do.LoadBalancers.List(ctx, &godo.ListOptions{PerPage: 50})
	if err != nil || len(list) != 1 || resp.Meta.Total != 1 || !slices.Equal(list[0].Tags, req.Tags) {
		t.Fatalf("list %+v %v", list, err)
	}

	req.DropletIDs, req.Tag, req.Tags = nil, "pool", nil
	req.StickySessions = nil
	up, _, err := do.LoadBalancers.Update(ctx, lb.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(up.DropletIDs, []int{d2.ID}) || up.StickySessions.Type != "none" || len(up.Tags) != 2 {
		t.Fatalf("updated %+v", up)
	}

	if _, err := do.Tags.TagResources(ctx, "wasmccm:cluster:c1", &godo.TagResourcesRequest{Resources: []godo.Resource{{ID: lb.ID, Type: godo.LoadBalancerResourceType}}}); !isStatus(err, 404) {
		t.Fatalf("tagging with a tag that does not exist: %v", err)
	}
	if _, _, err := do.Tags.Create(ctx, &godo.TagCreateRequest{Name: "wasmccm:cluster:c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := do.Tags.TagResources(ctx, "wasmccm:cluster:c1", &godo.TagResourcesRequest{Resources: []godo.Resource{{ID: lb.ID, Type: godo.LoadBalancerResourceType}}}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := do.LoadBalancers.Get(ctx, lb.ID); !slices.Contains(got.Tags, "wasmccm:cluster:c1") {
		t.Fatalf("tags %v", got.Tags)
	}

	for name, bad := range map[string]godo.LoadBalancerRequest{
		"https without certificate": {Name: "x", Region: "fra1", ForwardingRules: []godo.ForwardingRule{{EntryProtocol: "https", EntryPort: 443, TargetProtocol: "http", TargetPort: 1}}},
		"size and size unit":        {Name: "x", Region: "fra1", SizeSlug: "lb-small", SizeUnit: 1, ForwardingRules: req.ForwardingRules[1:]},
		"tag with a slash":          {Name: "x", Region: "fra1", Tags: []string{"wasmccm.io/cluster:c1"}, ForwardingRules: req.ForwardingRules[1:]},
		"missing droplet":           {Name: "x", Region: "fra1", DropletIDs: []int{999}, ForwardingRules: req.ForwardingRules[1:]},
	} {
		if _, _, err := do.LoadBalancers.Create(ctx, &bad); !isStatus(err, 422) {
			t.Errorf("%s: %v, want 422", name, err)
		}
	}

	if _, err := do.LoadBalancers.Delete(ctx, lb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := do.LoadBalancers.Delete(ctx, lb.ID); !isStatus(err, 404) {
		t.Fatalf("second delete: %v", err)
	}
}

// TestFaults: injected faults reach godo with the API's error shape.
func TestFaults(t *testing.T) {
	cloud, do := client(t, Options{})
	if _, err := cloud.Faults.Add(faultinject.Fault{PathPrefix: "/v2/droplets", Status: 429, RetryAfter: 3, FailNext: 1}); err != nil {
		t.Fatal(err)
	}
	_, resp, err := do.Droplets.List(context.Background(), nil)
	if !isStatus(err, 429) || resp.Header.Get("Retry-After") != "3" {
		t.Fatalf("injected 429: %v", err)
	}
	if _, _, err := do.Droplets.List(context.Background(), nil); err != nil {
		t.Fatalf("after the fault: %v", err)
	}
}

func isStatus(err error, status int) bool {
	var e *godo.ErrorResponse
	return errors.As(err, &e) && e.Response.StatusCode == status
}
