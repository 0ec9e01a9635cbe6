//go:build tinygo

package guest

import (
	"context"
	"time"
)

// withDeadline is a polledDeadline: context.WithDeadline starts a
// goroutine, which TinyGo modules built without a scheduler cannot.
func withDeadline(deadline time.Time) (context.Context, context.CancelFunc) {
	return newPolledDeadline(deadline), func() {}
}
