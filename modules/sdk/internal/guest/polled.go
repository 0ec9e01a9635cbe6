package guest

import (
	"context"
	"time"
)

// polledDeadline is a context that ends at a deadline without a timer:
// Err and Done read the clock when called, and Done's channel is closed
// by the first of them to find the deadline passed. Without a scheduler a
// module cannot block on a channel anyway, so checking Err, Done in a
// select with a default, or time.Until(Deadline) between polls sees the
// end as soon as it comes.
type polledDeadline struct {
	context.Context // Background: no values, never canceled otherwise
	deadline        time.Time
	done            chan struct{}
	ended           bool
}

func newPolledDeadline(deadline time.Time) *polledDeadline {
	return &polledDeadline{Context: context.Background(), deadline: deadline, done: make(chan struct{})}
}

func (c *polledDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *polledDeadline) Done() <-chan struct{} {
	c.Err()
	return c.done
}

func (c *polledDeadline) Err() error {
	if !c.ended && !time.Now().Before(c.deadline) {
		c.ended = true
		close(c.done)
	}
	if c.ended {
		return context.DeadlineExceeded
	}
	return nil
}
