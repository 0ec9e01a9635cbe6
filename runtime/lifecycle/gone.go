package lifecycle

import (
	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/lifecycle/internal/decision"
)

// Gone reports whether a controller would read the answer (out, err) to a
// call of export as "not there" or "shut down", as a rollout judges a
// candidate's answers (decision.Gone); the deletion policy asks it of the
// answers that corroborate a deletion.
func Gone(export string, out abi.Message, err error) bool {
	return decision.Gone(export, decision.Answer{Out: out, Err: err})
}
