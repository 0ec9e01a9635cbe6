package requests

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/wasmccm/wasmccm/examples/dofake"
	"github.com/wasmccm/wasmccm/examples/hcloudfake"
)

// Cloud names the provider whose API a run counts.
type Cloud string

const (
	// Hcloud is Hetzner Cloud: the hcloud module, or
	// hcloud-cloud-controller-manager, against examples/hcloudfake.
	Hcloud Cloud = "hcloud"
	// DigitalOcean is the digitalocean module, or
	// digitalocean-cloud-controller-manager, against examples/dofake.
	// It has no routes: its runs are NoRoutes ones.
	DigitalOcean Cloud = "digitalocean"
)

// fakeAPI is what a run reads of a fake cloud API.
type fakeAPI interface {
	Handler() http.Handler
	Requests() map[string]int
	Throttled() int
}

// cloudSetup is a fake API seeded with the run's machines, and how each
// CCM is configured for it.
type cloudSetup struct {
	fake fakeAPI
	// routes counts the routes in the cloud; nil for a cloud without.
	routes func() int
	// providerConfig is the module's, for the API served at url.
	providerConfig func(url string) string
	// official is the official CCM's flags and environment.
	official func(url string) (flags, env []string)
}

// newCloud makes the fake API of o.Cloud with a machine named NodeName(i)
// for each Node.
func newCloud(t *testing.T, o Options) cloudSetup {
	switch o.Cloud {
	case Hcloud, "":
		return newHcloud(t, o)
	case DigitalOcean:
		return newDigitalOcean(t, o)
	}
	t.Fatalf("unknown cloud %q", o.Cloud)
	return cloudSetup{}
}

const (
	networkName = "k8s"
	networkCIDR = "10.0.0.0/16"
	lbLocation  = "fsn1"
	doRegion    = "fra1"
)

// newHcloud: servers in three locations, all in network "k8s"
// (10.0.0.0/16), whose routes the route controller keeps.
func newHcloud(t *testing.T, o Options) cloudSetup {
	fake := hcloudfake.New(hcloudfake.Options{Token: token, RateLimit: o.RateLimit, EnforceRateLimit: o.RateLimit > 0})
	network, err := fake.AddNetwork(networkName, networkCIDR)
	if err != nil {
		t.Fatal(err)
	}
	locations := []string{"fsn1", "nbg1", "hel1"}
	for i := 1; i <= o.Nodes; i++ {
		if _, err := fake.AddServer(hcloudfake.Server{Name: NodeName(i), Type: "cpx21", Location: locations[i%3], Network: network.ID}); err != nil {
			t.Fatal(err)
		}
	}
	return cloudSetup{
		fake:   fake,
		routes: func() int { n, _ := fake.Network(network.ID); return len(n.Routes) },
		providerConfig: func(url string) string {
			return fmt.Sprintf("{endpoint: %q, tokenCredential: token, network: %s, loadBalancers: {location: %s}}", url+"/v1", networkName, lbLocation)
		},
		// Configured through its environment as its documentation says;
		// the server cache at its defaults (mode all, 10 s).
		official: func(url string) ([]string, []string) {
			return []string{"--cloud-provider=hcloud", "--allow-untagged-cloud=true"}, []string{
				"HCLOUD_TOKEN=" + token, "HCLOUD_ENDPOINT=" + url + "/v1", "HCLOUD_NETWORK=" + networkName,
				"HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true", "HCLOUD_METRICS_ENABLED=false", "HCLOUD_LOAD_BALANCERS_LOCATION=" + lbLocation,
			}
		},
	}
}

// newDigitalOcean: droplets in three regions, with the API's rate limit
// (5,000 an hour unless o.RateLimit says otherwise) reported in every
// answer's headers and enforced only when o.RateLimit is set.
func newDigitalOcean(t *testing.T, o Options) cloudSetup {
	fake := dofake.New(dofake.Options{Token: token, RateLimit: o.RateLimit, EnforceRateLimit: o.RateLimit > 0})
	regions := []string{"fra1", "ams3", "lon1"}
	for i := 1; i <= o.Nodes; i++ {
		if _, err := fake.AddDroplet(dofake.Droplet{Name: NodeName(i), Region: regions[i%3]}); err != nil {
			t.Fatal(err)
		}
	}
	return cloudSetup{
		fake: fake,
		providerConfig: func(url string) string {
			return fmt.Sprintf("{endpoint: %q, tokenCredential: token, region: %s}", url, doRegion)
		},
		// Configured through its environment as its documentation says;
		// METRICS_ADDR keeps its metrics server off port 80.
		official: func(url string) ([]string, []string) {
			return []string{"--cloud-provider=digitalocean"}, []string{
				"DO_ACCESS_TOKEN=" + token, "DO_OVERRIDE_URL=" + url, "REGION=" + doRegion, "METRICS_ADDR=127.0.0.1:0",
			}
		},
	}
}
