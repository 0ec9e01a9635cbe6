//go:build !tinygo

package guest

import (
	"context"
	"time"
)

// withDeadline is context.WithDeadline: standard Go runs its timer, so
// Done closes at the deadline even while the provider waits on it.
func withDeadline(deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), deadline)
}
