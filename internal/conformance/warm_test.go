package conformance

import (
	"strings"
	"testing"
	"time"
)

// TestWarmCounts: calls and requests counted over the simulated period are
// extrapolated to an hour, per call kind and per endpoint, and set against
// what the same calls cost from empty state and the cloud's limit.
func TestWarmCounts(t *testing.T) {
	w := &WarmReport{Period: 10 * time.Minute, StateMaxAge: 10 * time.Second, Endpoints: map[string]int{}, RateLimit: 3600}
	// Two lifecycle rounds: the first lists, the second is served from
	// the snapshot; one failed call.
	w.count("InstanceExists", 1, 2, false, false)
	w.count("InstanceExists", 0, 2, true, false)
	w.count("InstanceExists", 0, 2, false, true)
	w.count("ListRoutes", 2, 2, false, false)
	w.Endpoints["GET /v1/servers"] = 1
	w.Endpoints["GET /v1/routes"] = 2

	warm, cold := w.Totals()
	if warm != 18 || cold != 48 {
		t.Errorf("Totals = %d, %d; want 18 requests per hour (3 in 10 min), 48 from empty state (4 calls of 2 in 10 min)", warm, cold)
	}
	var b strings.Builder
	w.write(&b)
	for _, want := range []string{
		"  InstanceExists               18          6         36                  6  (6 failed)\n",
		"  ListRoutes                    6         12         12                  0\n",
		"  GET /v1/routes          12\n",
		"  GET /v1/servers          6\n",
		"total 18 requests per hour; 48 if every call started from empty state; the cloud's limit is 3600 (0%)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Index(b.String(), "GET /v1/routes") > strings.Index(b.String(), "GET /v1/servers") {
		t.Errorf("endpoints are not ordered by requests, most first:\n%s", b.String())
	}
}

// TestWarmPerHour: extrapolation rounds to the nearest request.
func TestWarmPerHour(t *testing.T) {
	for _, tt := range []struct {
		period  time.Duration
		n, want int
	}{
		{time.Hour, 7, 7},
		{10 * time.Minute, 7, 42},
		{7 * time.Minute, 1, 9}, // 8.57
		{2 * time.Hour, 3, 2},   // 1.5
		{0, 5, 0},
	} {
		if got := (&WarmReport{Period: tt.period}).perHour(tt.n); got != tt.want {
			t.Errorf("%d over %s = %d per hour; want %d", tt.n, tt.period, got, tt.want)
		}
	}
}

// TestEndpoint: requests are named by method and path template.
func TestEndpoint(t *testing.T) {
	for _, tt := range []struct {
		ex   Exchange
		want string
	}{
		{Exchange{Method: "GET", URL: "http://cloud/v1/servers?page=2&per_page=50"}, "GET /v1/servers"},
		{Exchange{Method: "GET", URL: "http://cloud/v1/servers/42"}, "GET /v1/servers/{id}"},
		{Exchange{Method: "POST", URL: "http://cloud/v1/networks/4/actions/delete_route"}, "POST /v1/networks/{id}/actions/delete_route"},
		{Exchange{Method: "GET", URL: "http://cloud/v2/instances/i-0001"}, "GET /v2/instances/{id}"},
		{Exchange{Method: "POST", URL: "https://ec2.example/", RequestBody: "Action=DescribeInstances&Version=2016-11-15"}, "POST /?Action=DescribeInstances"},
		{Exchange{Method: "GET", URL: "https://ec2.example/?Action=DescribeRouteTables"}, "GET /?Action=DescribeRouteTables"},
	} {
		if got := endpoint(tt.ex); got != tt.want {
			t.Errorf("endpoint(%s %s) = %q; want %q", tt.ex.Method, tt.ex.URL, got, tt.want)
		}
	}
}
