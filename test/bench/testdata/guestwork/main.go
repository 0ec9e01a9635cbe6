// Command guestwork exports the work of package work, so that the
// benchmarks can time each part of a provider call inside a module. It is
// a reactor with one export and no host imports beyond WASI.
package main

import "github.com/wasmccm/wasmccm/test/bench/testdata/guestwork/work"

//go:wasmexport work
func exportWork(kind, iters int32) int32 { return int32(work.Run(int(kind), int(iters))) }

func main() {}
