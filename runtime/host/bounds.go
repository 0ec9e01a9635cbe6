package host

import (
	"encoding/binary"
	"fmt"
)

// Compilation is the one thing the host does to a module before any limit
// applies: wazero decodes, validates and compiles every function up front,
// and its time and memory grow with the number of functions. A module of
// 600,000 empty functions fits a ConfigMap gzipped (0.9 MB) and took
// 1.76 s and 370 MB to compile. checkBounds reads only the section headers
// and the function count, a few dozen bytes, so that such a module is
// refused before wazero allocates anything for it.

// Compilation bounds, the defaults of Config.MaxFunctions and
// Config.MaxCodeBytes. The largest first-party module, simcloud built with
// standard Go, defines 2,535 functions in 2.4 MiB of code (TinyGo: a tenth
// of that); the bounds leave room for a provider carrying a cloud SDK
// twenty times its size, and compiling 50,000 functions is a fraction of
// the 600,000 above.
const (
	defaultMaxFunctions = 50_000
	defaultMaxCodeBytes = 32 << 20
)

// BoundsError is a module refused for its size before compilation.
type BoundsError struct {
	What        string // "functions" or "bytes of code"
	Have, Limit uint64
}

func (e *BoundsError) Error() string {
	return fmt.Sprintf("module defines %d %s, more than the %d the host compiles", e.Have, e.What, e.Limit)
}

// checkBounds walks the sections of a wasm binary and refuses one that
// defines more functions or more code than cfg allows. Malformed input is
// left to wazero's decoder, whose error is more precise; only what this
// walk can read reliably is judged.
func checkBounds(wasm []byte, cfg Config) error {
	if len(wasm) < 8 {
		return nil
	}
	rest := wasm[8:]
	for len(rest) > 0 {
		id := rest[0]
		size, n := binary.Uvarint(rest[1:])
		if n <= 0 || size > uint64(len(rest)-1-n) {
			return nil
		}
		body := rest[1+n : 1+n+int(size)]
		rest = rest[1+n+int(size):]
		switch id {
		case sectionFunction:
			count, n := binary.Uvarint(body)
			if n <= 0 {
				return nil
			}
			if count > uint64(cfg.MaxFunctions) {
				return &BoundsError{What: "functions", Have: count, Limit: uint64(cfg.MaxFunctions)}
			}
		case sectionCode:
			if size > uint64(cfg.MaxCodeBytes) {
				return &BoundsError{What: "bytes of code", Have: size, Limit: uint64(cfg.MaxCodeBytes)}
			}
		}
	}
	return nil
}

// Section IDs of the wasm binary format.
const (
	sectionFunction = 3
	sectionCode     = 10
)
