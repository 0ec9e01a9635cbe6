package assembly

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wasmccm/wasmccm/runtime/host"
)

// Each module's Nodes have Node controllers of their own (NodeServers),
// so a module whose calls run to their timeout holds only its own Node
// workers; but each such call also holds one of the module's instances,
// which its service controller and sweep need too, and asks a cloud that
// does not answer once more. A module whose Node calls stall stallsToOpen
// times in a row therefore gets its Node calls failed at once for
// stallPause, then is tried again; one more stall pauses it again, one
// answer resets it. Its Nodes lose nothing by it: a failed call is an
// error, which no controller reads as "gone", and they would have had the
// same error a timeout later.
const (
	stallsToOpen = 3
	stallPause   = 30 * time.Second
)

// stallGuard is one module's count of stalled Node calls.
type stallGuard struct {
	module string
	now    func() time.Time

	mu     sync.Mutex
	stalls int
	paused time.Time // calls fail at once until then
}

// admit returns nil when a call may go to the module.
func (g *stallGuard) admit() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.now().Before(g.paused) {
		return fmt.Errorf("module %s: its last %d Node calls stalled (timed out or found no free instance); its Node calls fail at once until %s",
			g.module, g.stalls, g.paused.Format(time.RFC3339))
	}
	return nil
}

// record counts a call's outcome.
func (g *stallGuard) record(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !stalled(err) {
		g.stalls = 0
		return
	}
	g.stalls++
	if g.stalls >= stallsToOpen {
		g.paused = g.now().Add(stallPause)
	}
}

// stalled reports whether err is a call that held its caller to the end
// of its deadline: a timeout, or a pool that had no instance free in time.
func stalled(err error) bool {
	var failure *host.FailureError
	return errors.As(err, &failure) && (failure.Reason == host.ReasonTimeout || failure.Reason == host.ReasonUnavailable)
}
