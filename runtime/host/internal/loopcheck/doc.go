// Package loopcheck rewrites a Wasm module so that whatever it runs
// reaches the host within a bounded amount of work, which is where the
// host stops a call whose deadline has passed, and so that its call stack
// stays within a bound the host sets.
//
// Compiled guest code cannot be preempted: a goroutine in it holds up a
// stop-the-world collection, and nothing stops it but code of its own that
// calls out. wazero's WithCloseOnContextDone checks at loop headers only,
// with an exit into Go at every turn; recursion, call trees without loops
// and bulk memory instructions escape it. The rewrite counts work inline,
// against a budget in a global of the module's own, and calls the
// imported check only when the budget is spent:
//
//   - every loop header takes the length of its loop in bytes of code,
//     which bounds what one turn runs besides calls;
//   - every function entry takes the function's length, which bounds what
//     it runs outside its loops. A function with no loop and no call, and
//     that no table or ref.func can reach (a leaf), is left as written: its
//     length is charged where it is called instead;
//   - a call to a host function takes HostCallCost, since the host's work
//     is not counted in code;
//   - a bulk memory or table instruction takes what it will move or fill
//     (memory.fill, memory.copy, memory.init, table.fill, table.copy,
//     table.init, table.grow).
//
// A second global counts down the estimated size of the frames a call has
// in progress (FrameBytes): each instrumented function takes its frame at
// entry and gives it back when it returns, and the check traps the call
// when the estimate passes Options.StackBytes. The host sizes the stack
// wazero grows from that bound.
//
// The rewrite also adds an export, EnterExport, through which the host
// enters every ABI export: wazero gives each exported function a call
// engine with its own stack, which keeps the size it grew to, so one entry
// point means one stack per instance.
//
// A module the rewrite cannot read (an instruction or section it does not
// know, tail calls) is refused: the host has no other way to stop it.
package loopcheck

// The import the rewritten module calls, of type (stackLeft i32) -> ().
// stackLeft is what remains of Options.StackBytes; below zero, the call's
// frames are past it.
const (
	ImportModule = "wasmccm-loopcheck"
	ImportName   = "check"
)

// EnterExport is the function the rewrite adds, of type (entry i32, a i64,
// b i64) -> i64: it calls the export Options.Entries[entry] with a and b
// as its parameters (each wrapped to i32 where the export takes one), and
// returns its result (zero-extended from i32, or 0 for none).
const EnterExport = "wasmccm-loopcheck.enter"

// Budget is how much work the guest does between two calls to the check,
// in bytes of code run: a loop turn costs the loop's length, a function
// entry the function's. The time between two calls is then about the same
// whatever the code.
const Budget = 1 << 20

// HostCallCost is what a call to an imported function takes from the
// budget: a few microseconds of host work, the time a quarter of a
// megabyte of code takes, so that a loop of host calls reaches the check
// within a few hundred of them.
const HostCallCost = 4 << 10

// bulkShift divides the bytes or elements a bulk instruction moves or
// fills into its cost: a byte of memory.fill is faster than a byte of
// code, and the shift keeps a 4 GiB operand within an i32.
const bulkShift = 1

// FrameBytes is the estimate of the native stack a function of bodyBytes
// of code with params parameters and results results takes per call.
// wazero gives every spilled value its own slot, so a frame grows with the
// code; runtime/host's TestFrameBytesBoundsFrames measures frames of
// functions built to spill as much as they can (live locals, values held
// across calls, v128 values, many blocks) against it.
func FrameBytes(bodyBytes, params, results int) int {
	return 64 + 4*bodyBytes + 16*(params+results)
}
