package egress

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

func TestAllowedOrigins(t *testing.T) {
	list, err := ParseAllowedOrigins([]string{"https://api.example.com", "http://127.0.0.1:8780", "HTTPS://Upper.Example.COM:8443/"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		url   string
		allow bool
	}{
		{"https://api.example.com/v1/x", true},
		{"https://api.example.com:443/v1/x", true},
		{"http://api.example.com/v1/x", false},
		{"https://api.example.com:8443/", false},
		{"https://evil.example.com/", false},
		{"https://api.example.com.evil.com/", false},
		{"http://127.0.0.1:8780/v1", true},
		{"http://127.0.0.1:8781/v1", false},
		{"https://upper.example.com:8443/x", true},
		{"ftp://api.example.com/", false},
		{"http://169.254.169.254/latest/meta-data", false},
	}
	for _, tc := range cases {
		u, _ := url.Parse(tc.url)
		if _, err := list.check(u); (err == nil) != tc.allow {
			t.Errorf("%s: allowed=%v, want %v (%v)", tc.url, err == nil, tc.allow, err)
		}
	}
	for _, bad := range []string{"https://a.example.com/path", "https://user@a.example.com", "a.example.com", "https://a.example.com?q=1"} {
		if _, err := ParseAllowedOrigins([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestGuardedDialer: names that resolve to internal addresses are refused
// even when the name is allowed; internal addresses are reachable only when
// listed by IP.
func TestGuardedDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	dns := map[string][]string{
		"metadata.example": {"169.254.169.254"},
		"loopback.example": {"127.0.0.1"},
		"mixed.example":    {"198.51.100.7", "127.0.0.1"},
	}
	g := &guardedDialer{
		allowedIPs: map[string]bool{"127.0.0.1": true},
		lookup: func(_ context.Context, host string) ([]net.IPAddr, error) {
			var out []net.IPAddr
			for _, a := range dns[host] {
				out = append(out, net.IPAddr{IP: net.ParseIP(a)})
			}
			return out, nil
		},
		dialer: net.Dialer{Timeout: time.Second},
	}
	cases := []struct {
		addr   string
		denied bool
	}{
		{"127.0.0.1:" + port, false},
		{"169.254.169.254:80", true},
		{"[::1]:80", true},
		{"0.0.0.0:80", true},
		{"metadata.example:80", true},
		{"loopback.example:" + port, true},
		{"mixed.example:" + port, true},
	}
	for _, tc := range cases {
		conn, err := g.DialContext(context.Background(), "tcp", tc.addr)
		if conn != nil {
			conn.Close()
		}
		_, isDenied := err.(*deniedError)
		if isDenied != tc.denied {
			t.Errorf("%s: err = %v, want denied=%v", tc.addr, err, tc.denied)
		}
	}
}

func TestHTTPRedirectsAreChecked(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("secret")) }))
	defer target.Close()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/x", http.StatusFound)
	}))
	defer origin.Close()
	h, err := New("t", Config{AllowedOrigins: []string{origin.URL}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp := answer(context.Background(), h, &abi.HTTPRequest{Method: "GET", URL: origin.URL + "/"})
	if !strings.Contains(resp.Error, "not in the module's allowed origins") || len(resp.Body) != 0 {
		t.Fatalf("redirect followed to a disallowed origin: %+v", resp)
	}
}

// answer performs req through h and returns what the module gets.
func answer(ctx context.Context, h *Client, req *abi.HTTPRequest) *abi.HTTPResponse {
	resp, _ := h.Do(ctx, req)
	return resp
}
