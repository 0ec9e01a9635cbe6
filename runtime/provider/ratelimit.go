package provider

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/events"
)

// rateEvents turns the rate budget's reports of throttled requests into
// CloudRateLimited Events on the CCM's Pod. The budget reports each origin
// at most once a minute, so a throttled cluster does not flood the API
// server with Events. The budget is made before the Cloud, hence the
// pointer filled in afterwards.
type rateEvents struct{ cloud atomic.Pointer[Cloud] }

func (r *rateEvents) report(t egress.Throttle) {
	c := r.cloud.Load()
	if c == nil {
		return
	}
	after := t.RetryAfter.Round(time.Second)
	msg := fmt.Sprintf("requests to %s found no room in their budget (the cloud-config's http.rateLimits) before their call's deadline: the host answered them 429, which the controllers retry; the next may go in %s. Raise the budget only if the cloud's quota allows it",
		t.Origin, after)
	if t.By == egress.ThrottledByCloud {
		msg = fmt.Sprintf("%s answered 429 Too Many Requests: the host holds requests to it for %s and paces them to what the cloud's rate-limit headers allow; the cloud's quota is spent, by this CCM or by other clients of the same account",
			t.Origin, after)
	}
	c.events.emit(events.CloudRateLimited, msg)
}
