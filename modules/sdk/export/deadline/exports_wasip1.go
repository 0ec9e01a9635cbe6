//go:build wasip1

//lint:file-ignore U1000 these functions are called by the host through //go:wasmexport.

package deadline

import (
	"time"

	"github.com/wasmccm/wasmccm/modules/sdk/internal/guest"
)

//go:wasmexport wasmccm_set_deadline
func exportSetDeadline(timeLeft int64) { guest.SetDeadline(time.Duration(timeLeft)) }
