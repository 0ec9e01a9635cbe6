package host

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/credentials/credentialstest"
	"github.com/wasmccm/wasmccm/runtime/egress"
)

// TestHostileModuleCannotLeakToken: a module that reads the token and
// publishes it in labels, addresses, a provider ID, a load balancer
// hostname, a log line and an error, plain and base64-encoded, and names
// it in a request to an allowed origin it is not bound to, gets "not
// granted" with default settings: nothing it answers, logs or sends holds
// the token, and no instance's memory does. Made readable, the same module
// leaks it everywhere, which shows the checks can see a leak.
func TestHostileModuleCannotLeakToken(t *testing.T) {
	const secret = "leak-canary-7f3a9c"
	encoded := base64.StdEncoding.EncodeToString([]byte(secret))
	cloud := fakeCloud(t)
	var collected atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { collected.Add(1) }))
	defer other.Close()
	for _, tc := range toolchains(t) {
		for _, readable := range []bool{false, true} {
			name := string(tc) + "/default"
			if readable {
				name = string(tc) + "/readable"
			}
			t.Run(name, func(t *testing.T) {
				var mu sync.Mutex
				var said []string // every answer, error and log line
				cfg := Config{Name: "leaker-" + name, ProviderConfig: []byte(other.URL), CallTimeout: 5 * time.Second,
					HTTP: egress.Config{AllowedOrigins: []string{cloud.URL, other.URL}},
					Credentials: credentials.Config{Dir: credentialstest.SecretDir(t, map[string]string{"token": secret}),
						Auth: []credentials.AuthConfig{{Name: "token", Origins: []string{cloud.URL}, Bearer: &credentials.BearerAuth{Key: "token"}}}},
					Log: func(_ abi.LogLevel, msg string) { mu.Lock(); said = append(said, msg); mu.Unlock() },
				}
				if readable {
					cfg.Credentials.Readable = []string{"token"}
				}
				mod, err := New(context.Background(), guestWasm(t, "leaker", tc), cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer mod.Close(context.Background())
				node := &abi.Node{Name: "n"}
				svc := &abi.LoadBalancerRequest{Service: abi.Service{Name: "web"}}
				for _, c := range []struct {
					export string
					in     abi.Message
					out    abi.Message
				}{
					{abi.ExportInstanceExists, node, new(abi.Bool)},
					{abi.ExportInstanceShutdown, node, new(abi.Bool)},
					{abi.ExportInstanceMetadata, node, new(abi.InstanceMetadata)},
					{abi.ExportEnsureLoadBalancer, svc, new(abi.LoadBalancerStatus)},
				} {
					if err := mod.Call(context.Background(), c.export, c.in, c.out); err != nil {
						said = append(said, err.Error())
					} else {
						b, _ := json.Marshal(c.out)
						said = append(said, string(b))
					}
				}
				all := strings.Join(said, "\n")
				leaked := strings.Contains(all, secret) || strings.Contains(all, encoded)
				scan := scanInstances([]byte(secret))
				if readable {
					if !leaked || scan.Matches == 0 {
						t.Fatalf("readable: the leak went unseen (in memory %d times):\n%s", scan.Matches, all)
					}
					return
				}
				if leaked || scan.Matches != 0 || scan.Instances == 0 {
					t.Fatalf("the token leaked (%d times in %d instances' memory):\n%s", scan.Matches, scan.Instances, all)
				}
				for _, want := range []string{
					`"leak":"credential token: not granted to this module"`,                              // a label
					`"Address":"leak-credential token: not granted to this module"`,                      // an address
					`"Hostname":"credential token: not granted to this module.example"`,                  // a load balancer
					"the token is credential token: not granted to this module",                          // an error
					"token: credential token: not granted to this module base64:",                        // a log line
					`exfiltration: http: denied: credential "token" is not bound to origin ` + other.URL, // a request
				} {
					if !strings.Contains(all, want) {
						t.Errorf("the module did not get %q:\n%s", want, all)
					}
				}
				if n := collected.Load(); n != 0 {
					t.Errorf("%d requests reached the origin the credential is not bound to", n)
				}
			})
		}
	}
}
