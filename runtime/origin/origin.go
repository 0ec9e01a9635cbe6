// Package origin normalises the "scheme://host[:port]" destinations an
// operator grants a module: the allowed origins of its requests, the
// origins each of its credentials is bound to, and those a rate budget
// limits. Two spellings of one destination ("HTTPS://API.example.com/"
// and "https://api.example.com:443") are one Origin.
package origin

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Origin is a normalised scheme://host:port: the scheme and host in lower
// case, the host without a trailing dot, the port explicit.
type Origin struct{ Scheme, Host, Port string }

func (o Origin) String() string { return o.Scheme + "://" + net.JoinHostPort(o.Host, o.Port) }

// Of returns the origin of u, which must be http or https and name a host.
func Of(u *url.URL) (Origin, error) {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	switch scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		if port == "" {
			port = "443"
		}
	default:
		return Origin{}, fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return Origin{}, errors.New("no host")
	}
	return Origin{scheme, host, port}, nil
}

// Set is a set of origins.
type Set map[Origin]bool

// ParseSet validates "scheme://host[:port]" entries; paths, queries and
// user info are rejected because a grant covers whole origins and anything
// more specific would promise what it cannot keep.
func ParseSet(entries []string) (Set, error) {
	set := Set{}
	for _, e := range entries {
		u, err := url.Parse(e)
		if err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", e, err)
		}
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
			return nil, fmt.Errorf("allowed origin %q: only scheme://host[:port] is allowed", e)
		}
		o, err := Of(u)
		if err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", e, err)
		}
		set[o] = true
	}
	return set, nil
}
