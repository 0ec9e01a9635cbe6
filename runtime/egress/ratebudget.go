package egress

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/internal/reportgate"
)

// slidingWindow is the window of a "sliding" quota: DigitalOcean counts
// its limit per hour.
const slidingWindow = time.Hour

// Throttle reports requests to an origin held back, By the budget
// (ThrottledByHost: the host answered the module 429 itself) or by the
// cloud (ThrottledByCloud: it answered 429), with how long until the next
// request may go.
type Throttle struct {
	// Origin is the limited origin, normalised to scheme://host:port.
	Origin     string
	By         string
	RetryAfter time.Duration
}

// Values of Throttle.By and of the by label of
// wasmccm_host_http_throttled_total.
const (
	ThrottledByHost  = "host"
	ThrottledByCloud = "cloud"
)

// throttledShadow is the by label of a shadow's requests the host answered
// 429 for want of spare room. They are not reported as a Throttle: the
// module in service is not held back, and a report would hold back the
// next one that is.
const throttledShadow = "shadow"

// codeThrottled is the code label of a request the budget refused, with
// the host's 429.
const codeThrottled = "throttled"

// HeaderThrottled marks the 429 the host answers itself, so that a module
// or an operator reading a trace can tell it from the cloud's.
const HeaderThrottled = "Wasmccm-Throttled"

// throttleReportInterval is how often one origin may be reported: a
// throttled cluster must not flood the API server with Events.
const throttleReportInterval = time.Minute

// maxWaitMargin is the most of a call's remaining time that a request
// keeps for itself: a wait for the budget that would leave less is not
// started. A cloud API request takes well under a second, so a second
// left is enough to send it, and asking more would refuse requests that
// a short call deadline can still fit.
const maxWaitMargin = time.Second

// maxCloudDelay caps every pause and pacing interval the cloud's headers
// ask for. An hour is Hetzner's whole window; a longer one is a broken
// header or a quota no pacing saves. The cap matters because a paused
// origin sends nothing, so nothing but the cap's expiry would bring news
// that the quota is back.
const maxCloudDelay = time.Hour

// RateBudget holds back requests to the origins it limits so that the
// cloud's quota lasts. One RateBudget serves a whole CCM process: every
// module generation (the module in service, a shadow one during a
// rollout, the one after a hot reload) is handed the same one, because the
// cloud counts requests per project, not per module. A nil *RateBudget
// limits nothing, and an origin it does not list costs one map lookup.
//
// A module in shadow (Config.Shadow, Client.SetShadow), the candidate
// of a rollout, gets only spare room and never delays the module in
// service: its request goes only if a token is free at once and at least
// half the burst (at least one request) stays free after it, and never
// while the cloud's headers say the quota is low; otherwise it is answered
// the host's 429 at once, without reserving a later token. With a burst of
// 1 a shadow's requests are never sent: every token would be the one the
// module in service needs next. Whatever the module makes of that 429, the
// host withholds the answer of the call it came in (Client.Do reports the
// refusal; package runtime/host's Module.Call returns ErrShadowThrottled), so that the host's own refusal never reads as the
// candidate failing or disagreeing.
//
// Each limited origin has a token bucket at the configured rate and
// burst. A request that would have to wait for a token past its call's
// deadline (less a margin for the request itself) is not sent: the module
// gets a 429 with Retry-After and Wasmccm-Throttled: host, which its SDK
// turns into RetryAfter and the CCM into api.RetryError: the controllers
// retry after it, and nothing reads as "gone".
//
// The cloud's own answers make the bucket slower, never faster:
//
//   - RateLimit-Limit L, RateLimit-Remaining R and RateLimit-Reset (a Unix
//     time), by default, are read as Hetzner defines them: the quota is
//     full again at
//     Reset and refills evenly until then, one request every
//     (Reset − now) / (L − R). While R < L/10, requests go no faster than
//     that refill, one at a time, until Reset or until a response shows R
//     back at L/10 or more. Spending only the refill keeps R where it is,
//     so our own requests do not drive it to 0 and a 429; the tenth in
//     reserve absorbs requests already in flight and the other clients of
//     the project. Why not spread R until Reset, as for a quota
//     that refills only at Reset: with Hetzner's, Reset is an hour ahead
//     when R is near 0, and that would send one request an hour where the
//     cloud allows one a second.
//   - With quotaHeaders "sliding", they are read as DigitalOcean defines
//     them: L requests per sliding hour, Reset when the oldest request
//     leaves the window. While R < L/10, requests go no faster than the
//     window's average, one every hour / L, until a response shows R back
//     at L/10 or more (at most an hour without news).
//   - A 429 from the cloud pauses the origin for its Retry-After or, without
//     one, for one refill interval from those headers, which is when
//     Hetzner will take the next request (not Reset, which is when all of
//     them are back); for a sliding quota until its Reset, when the oldest
//     request leaves the window; or else for a second, what the SDK's rest
//     client assumes. A request already scheduled when the 429 arrives
//     still goes.
//
// A Reset in the past, which is also how a delta-seconds Reset (IETF
// drafts) reads, carries no pacing; every delay from the headers is capped
// at maxCloudDelay.
//
// The adaptive part applies only to origins listed in http.rateLimits,
// with a rate of their own or quotaHeaders alone: headers of the same
// names mean different things at different APIs (a refilling quota's
// Reset, a sliding window's oldest request), and read the wrong way they
// pace a quota into a 429 or stall it for an hour, so the host acts on
// them only where the operator has said how the origin's headers read.
type RateBudget struct {
	// module labels the budget's metrics.
	module string
	// buckets is keyed by origin.String(), the label the request path
	// already has.
	buckets    map[string]*bucket
	onThrottle func(Throttle)
	// reported spaces the reports of each origin's throttling.
	reported *reportgate.Gate
}

// NewRateBudget makes module's budget of limits, whose origins must be
// among allowedOrigins. onThrottle, when set, is told when requests to an origin
// are throttled, at most once per origin per minute; it must not block. No
// limits make a nil budget, which limits nothing.
func NewRateBudget(module string, limits []cloudconfig.RateLimit, allowedOrigins []string, onThrottle func(Throttle)) (*RateBudget, error) {
	if len(limits) == 0 {
		return nil, nil
	}
	paces, err := cloudconfig.Paces(limits, allowedOrigins)
	if err != nil {
		return nil, err
	}
	r := &RateBudget{module: module, buckets: map[string]*bucket{}, onThrottle: onThrottle, reported: reportgate.New(throttleReportInterval)}
	for _, p := range paces {
		b := newBucket(p)
		r.buckets[b.label] = b
	}
	return r, nil
}

// bucket is one origin's state, a token bucket in the form of GCRA: tat is
// when the bucket would be full again if nothing more were sent.
type bucket struct {
	label    string
	interval time.Duration
	// tau is how far ahead of now tat may run: burst − 1 intervals.
	tau time.Duration
	// shadowReserve is the part of the burst a shadow's request must leave
	// free (RateBudget).
	shadowReserve time.Duration
	// sliding says the origin's quota headers describe a sliding window
	// (cloudconfig.RateLimit.QuotaHeaders).
	sliding bool

	mu  sync.Mutex
	tat time.Time
	// pausedUntil holds every request after a 429 from the cloud.
	pausedUntil time.Time
	// pace is the interval the cloud's headers ask for between requests,
	// until paceUntil; last is when the latest request was let go.
	pace      time.Duration
	paceUntil time.Time
	last      time.Time
}

func newBucket(p cloudconfig.Pace) *bucket {
	return &bucket{label: p.Origin.String(), interval: p.Interval, tau: time.Duration(p.Burst-1) * p.Interval,
		shadowReserve: time.Duration(max(1, p.Burst/2)) * p.Interval, sliding: p.Sliding}
}

// reserve schedules a request arriving at now and returns when it may go.
// One that could go only after latest (zero: no limit) is not scheduled,
// ok false, and takes no token; one that needs no wait always goes. A
// shadow's request goes at once or not at all, and only with spare room
// (RateBudget).
func (b *bucket) reserve(now, latest time.Time, shadow bool) (at time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at = later(later(now, b.tat.Add(-b.tau)), b.pausedUntil)
	// The cloud's pace holds even when it is no slower than our own: our
	// burst may be fuller than the cloud's quota (other clients spend it
	// too, or our own count drifted from the cloud's), and while the
	// cloud says the quota is low, a burst is what drives it to 429.
	paced := b.pace > 0 && now.Before(b.paceUntil)
	if paced {
		at = later(at, b.last.Add(b.pace))
	}
	if shadow {
		// A bucket is never fuller than the burst, however long ago tat.
		at = later(at, later(b.tat, now).Add(b.shadowReserve-b.tau))
		if paced {
			at = later(at, b.paceUntil)
		}
		latest = now
	}
	if at.After(now) && !latest.IsZero() && at.After(latest) {
		return at, false
	}
	b.tat = later(b.tat, at).Add(b.interval)
	b.last = at
	return at, true
}

// observe applies a response's rate-limit headers (RateBudget's rule) and
// returns the pause a 429 imposes.
func (b *bucket) observe(now time.Time, status int, h http.Header) time.Duration {
	q := readQuota(now, h, b.sliding)
	b.mu.Lock()
	defer b.mu.Unlock()
	if q.known {
		b.pace, b.paceUntil = 0, time.Time{}
		if q.low {
			b.pace, b.paceUntil = q.refill, q.paceUntil
		}
	}
	if status != http.StatusTooManyRequests {
		return 0
	}
	pause, ok := retryAfter(now, h.Get("Retry-After"))
	switch {
	case ok:
	case q.known && b.sliding && q.reset.After(now):
		// The next request fits when the oldest leaves the window.
		pause = q.reset.Sub(now)
	case q.known && q.refill > 0:
		pause = q.refill
	default:
		pause = time.Second
	}
	pause = min(pause, maxCloudDelay)
	b.pausedUntil = later(b.pausedUntil, now.Add(pause))
	return pause
}

// quota is what a response's RateLimit-Limit, -Remaining and -Reset say.
type quota struct {
	// known says all three were there and sensible.
	known bool
	// refill is the interval at which the quota refills, 0 when it is
	// full; low says Remaining is under a tenth of Limit.
	refill time.Duration
	low    bool
	// reset is the header's Reset; paceUntil is until when pacing holds
	// without news.
	reset, paceUntil time.Time
}

// readQuota reads the quota headers of h.
//
// A sliding quota (DigitalOcean: Limit per hour, Reset when the oldest
// request leaves the window) refills on average one request per
// hour/Limit: its Reset is near even when the quota is spent, so spacing
// Remaining until Reset, as for a refilling quota, would spend the rest at
// once; and its pacing holds until a response shows the quota back, at
// most one window.
func readQuota(now time.Time, h http.Header, sliding bool) quota {
	limit, err1 := strconv.ParseInt(h.Get("RateLimit-Limit"), 10, 64)
	remaining, err2 := strconv.ParseInt(h.Get("RateLimit-Remaining"), 10, 64)
	unix, err3 := strconv.ParseInt(h.Get("RateLimit-Reset"), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || limit <= 0 || remaining < 0 {
		return quota{}
	}
	q := quota{known: true, reset: time.Unix(unix, 0)}
	if remaining >= limit {
		return q
	}
	q.low = float64(remaining) < float64(limit)/10
	if sliding {
		q.refill = min(slidingWindow/time.Duration(limit), maxCloudDelay)
		q.paceUntil = now.Add(slidingWindow)
		return q
	}
	left := q.reset.Sub(now)
	if left <= 0 {
		return quota{known: true, reset: q.reset}
	}
	q.refill = min(left/time.Duration(limit-remaining), maxCloudDelay)
	q.paceUntil = q.reset
	return q
}

// retryAfter reads a Retry-After header, capped at maxCloudDelay.
func retryAfter(now time.Time, v string) (time.Duration, bool) {
	d, ok := abi.ParseRetryAfter(v, now)
	return min(d, maxCloudDelay), ok
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// wait holds a request to the origin labelled o (origin.String()) until
// the budget lets it go, and answers nil then. Otherwise it answers what
// the module gets instead, with the request's code label: a 429
// (codeThrottled) when the wait would end later than ctx's deadline less a
// margin (the smaller of maxWaitMargin and the request's timeout), or
// for a shadow's request when there is no spare room now; an error
// ("timeout") when ctx ends during the wait.
func (r *RateBudget) wait(ctx context.Context, o string, timeout time.Duration, shadow bool) (*abi.HTTPResponse, string) {
	if r == nil {
		return nil, ""
	}
	b := r.buckets[o]
	if b == nil {
		return nil, ""
	}
	now := time.Now()
	var latest time.Time
	if deadline, ok := ctx.Deadline(); ok {
		latest = deadline.Add(-min(maxWaitMargin, timeout))
	}
	at, ok := b.reserve(now, latest, shadow)
	delay := at.Sub(now)
	if !ok {
		// A shadow's 429 reads as any other: a module that could tell it
		// runs in shadow could behave until it is promoted.
		if shadow {
			httpThrottled.WithLabelValues(r.module, b.label, throttledShadow).Inc()
		} else {
			httpThrottled.WithLabelValues(r.module, b.label, ThrottledByHost).Inc()
			r.report(b, now, ThrottledByHost, delay)
		}
		return throttledResponse(b.label, delay), codeThrottled
	}
	httpRateWait.WithLabelValues(r.module, b.label).Observe(delay.Seconds())
	if delay <= 0 {
		return nil, ""
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil, ""
	case <-ctx.Done():
		return &abi.HTTPResponse{Error: fmt.Sprintf("request to %s: %v while waiting for its rate budget", b.label, ctx.Err())}, "timeout"
	}
}

// observe applies the response to a request to the origin labelled o.
func (r *RateBudget) observe(o string, status int, h http.Header) {
	if r == nil {
		return
	}
	b := r.buckets[o]
	if b == nil {
		return
	}
	now := time.Now()
	pause := b.observe(now, status, h)
	if status == http.StatusTooManyRequests {
		httpThrottled.WithLabelValues(r.module, b.label, ThrottledByCloud).Inc()
		r.report(b, now, ThrottledByCloud, pause)
	}
}

func (r *RateBudget) report(b *bucket, now time.Time, by string, after time.Duration) {
	if r.onThrottle != nil && r.reported.Admit(b.label, now) {
		r.onThrottle(Throttle{Origin: b.label, By: by, RetryAfter: after})
	}
}

// throttledResponse is the 429 the host answers in the cloud's stead.
// Retry-After is in whole seconds, rounded up: rounding down could ask for
// the retry before the budget has room.
func throttledResponse(label string, after time.Duration) *abi.HTTPResponse {
	secs := strconv.FormatInt(max(int64((after+time.Second-1)/time.Second), 1), 10)
	return &abi.HTTPResponse{
		StatusCode: http.StatusTooManyRequests,
		Headers: []abi.Header{
			{Name: "Retry-After", Value: secs},
			{Name: HeaderThrottled, Value: ThrottledByHost},
			{Name: "Content-Type", Value: "text/plain; charset=utf-8"},
		},
		Body: []byte("wasmccm: the rate budget for " + label + " (http.rateLimits) has no room before this call's deadline; retry after " + secs + "s\n"),
	}
}
