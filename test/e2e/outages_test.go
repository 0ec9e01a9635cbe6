package e2e

import (
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/examples/faultinject"
)

// apiOutages are failures of a whole cloud API, each of which must delete
// nothing: server errors, throttling, refused credentials and requests
// that outlast the CCM's 5 s HTTP timeout.
var apiOutages = []faultinject.Fault{
	{Name: "server-error", Status: 500, Always: true},
	{Name: "throttled", Status: 429, Always: true, RetryAfter: 1},
	{Name: "unauthorized", Status: 401, Always: true},
	{Name: "timeout", Latency: 6 * time.Second},
}

// duringEachOutage injects each of apiOutages into faults in turn, runs
// poke to make the controllers ask the cloud, leaves the outage for
// settle, lifts it and runs check with its name. An outage the cloud never
// served fails the test: it would have proved nothing.
func duringEachOutage(t *testing.T, faults *faultinject.Set, settle time.Duration, poke func(), check func(outage string)) {
	t.Helper()
	for _, f := range apiOutages {
		if _, err := faults.Add(f); err != nil {
			t.Fatal(err)
		}
		hits := faults.Hits()
		poke()
		time.Sleep(settle)
		faults.Remove(f.Name)
		if faults.Hits() == hits {
			t.Fatalf("fault %s was never hit", f.Name)
		}
		check(f.Name)
	}
}
