package cloudconfig

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/wasmccm/wasmccm/runtime/origin"
)

// RateLimit is one origin's request budget, an entry of http.rateLimits,
// which runtime/egress's RateBudget enforces.
type RateLimit struct {
	// Origin is "scheme://host[:port]", one of the allowed origins.
	Origin string `json:"origin"`
	// PerHour is the sustained rate per hour; exclusive with PerSecond.
	PerHour int `json:"perHour,omitempty"`
	// PerSecond is the sustained rate per second; exclusive with PerHour.
	PerSecond int `json:"perSecond,omitempty"`
	// Burst is how many requests may go back to back after a quiet spell.
	// Default 1: requests evenly spaced.
	Burst int `json:"burst,omitempty"`
	// QuotaHeaders says how the origin's RateLimit-Limit, -Remaining and
	// -Reset headers read: "refill" (the default; Hetzner Cloud), Reset is
	// when the quota is full again and it refills evenly until then;
	// "sliding" (DigitalOcean), Limit requests per sliding hour, Reset is
	// when the oldest request leaves it. With QuotaHeaders set, PerHour
	// and PerSecond may be left out: the origin then goes as fast as its
	// headers allow.
	QuotaHeaders string `json:"quotaHeaders,omitempty"`
}

// Values of RateLimit.QuotaHeaders.
const (
	QuotaRefill  = "refill"
	QuotaSliding = "sliding"
)

// MaxRate and MaxBurst bound a RateLimit: a request every microsecond is
// beyond any cloud API, and the bounds keep burst × interval within a
// time.Duration.
const (
	MaxRate  = 1_000_000
	MaxBurst = 1_000_000
)

// Pace is what a valid RateLimit asks of its origin.
type Pace struct {
	Origin origin.Origin
	// Interval between requests at the sustained rate; 0 when only the
	// origin's quota headers pace it.
	Interval time.Duration
	// Burst is at least 1.
	Burst int
	// Sliding: the quota headers describe a sliding window.
	Sliding bool
}

// Paces checks limits against allowedOrigins, naming every problem, and
// returns what each asks for.
func Paces(limits []RateLimit, allowedOrigins []string) ([]Pace, error) {
	allowed, err := origin.ParseSet(allowedOrigins)
	if err != nil {
		return nil, err
	}
	var paces []Pace
	var errs []error
	seen := map[origin.Origin]bool{}
	for i, l := range limits {
		p, err := l.pace(allowed)
		if err == nil && seen[p.Origin] {
			err = fmt.Errorf("origin %s is listed twice", p.Origin)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("rateLimits[%d]: %w", i, err))
			continue
		}
		seen[p.Origin] = true
		paces = append(paces, p)
	}
	return paces, errors.Join(errs...)
}

func (l RateLimit) pace(allowed origin.Set) (Pace, error) {
	if _, err := origin.ParseSet([]string{l.Origin}); err != nil {
		return Pace{}, err
	}
	u, _ := url.Parse(l.Origin) // valid: checked above
	o, _ := origin.Of(u)
	if !allowed[o] {
		return Pace{}, fmt.Errorf("origin %s is not in http.allowedOrigins", o)
	}
	if l.QuotaHeaders != "" && l.QuotaHeaders != QuotaRefill && l.QuotaHeaders != QuotaSliding {
		return Pace{}, fmt.Errorf("%s: quotaHeaders %q is neither %q nor %q", o, l.QuotaHeaders, QuotaRefill, QuotaSliding)
	}
	var interval time.Duration
	switch {
	case l.PerHour == 0 && l.PerSecond == 0 && l.QuotaHeaders != "":
		// No rate of our own: only the cloud's headers pace the origin.
	case (l.PerHour > 0) == (l.PerSecond > 0) || l.PerHour < 0 || l.PerSecond < 0:
		return Pace{}, fmt.Errorf("%s: set exactly one of perHour and perSecond, above 0 (or quotaHeaders alone)", o)
	case l.PerHour > 0 && int64(l.PerHour) <= MaxRate*3600:
		interval = time.Hour / time.Duration(l.PerHour)
	case l.PerSecond > 0 && l.PerSecond <= MaxRate:
		interval = time.Second / time.Duration(l.PerSecond)
	default:
		return Pace{}, fmt.Errorf("%s: the rate exceeds %d requests per second", o, MaxRate)
	}
	if l.Burst < 0 || l.Burst > MaxBurst {
		return Pace{}, fmt.Errorf("%s: burst %d is outside 0..%d", o, l.Burst, MaxBurst)
	}
	return Pace{Origin: o, Interval: interval, Burst: max(l.Burst, 1), Sliding: l.QuotaHeaders == QuotaSliding}, nil
}
