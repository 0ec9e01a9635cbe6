package cloudconfig

import (
	"encoding/json"
	"time"
)

// Duration is a cloud-config duration, written as Go writes one ("30s",
// "10m"). It reads and writes as metav1.Duration does, without importing
// the Kubernetes API machinery for it.
type Duration struct{ time.Duration }

// UnmarshalJSON reads a quoted Go duration.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = parsed
	return nil
}

// MarshalJSON writes d as a quoted Go duration.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }
