package abi

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// httpDateLayouts are the forms of an HTTP date (RFC 9110 §5.6.7): the
// IMF-fixdate every server should send, then the two obsolete forms a
// recipient must still accept.
var httpDateLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",
	"Monday, 02-Jan-06 15:04:05 GMT",
	"Mon Jan _2 15:04:05 2006",
}

// ParseRetryAfter reads a Retry-After value, delay-seconds or an HTTP date,
// as the delay from now it asks for: never negative, zero for a date in
// the past, the longest time.Duration for more seconds than it holds. The
// host (its rate budget and its own 429s), the SDK and the
// conformance suite all read the header with it, each bounding the delay
// as its own use requires.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if secs > math.MaxInt64/uint64(time.Second) {
			return math.MaxInt64, true
		}
		return time.Duration(secs) * time.Second, true
	}
	for _, layout := range httpDateLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	return 0, false
}
