// Package wasmtest assembles small WebAssembly modules in tests, for the
// cases no compiler will produce on purpose: wrong export signatures, a
// wrong ABI version, pointers outside memory, unknown imports. It writes
// the binary format directly, covering just the sections those modules use.
package wasmtest

import "encoding/binary"

// Value types.
const (
	I32 byte = 0x7f
	I64 byte = 0x7e
)

// Import is an imported function.
type Import struct {
	Module, Name    string
	Params, Results []byte
}

// Func is a defined function; Export names it in the export section when
// set. Locals are the value types of its locals, one each, numbered after
// its parameters. Body is its instructions without the final end. Start
// makes it the module's start function; InTable puts it in the module's
// table, in the order of the functions, for CallIndirect.
type Func struct {
	Export          string
	Params, Results []byte
	Locals          []byte
	Body            []byte
	Start, InTable  bool
}

// Module is a module to assemble. MemoryPages > 0 defines and exports a
// memory named "memory".
type Module struct {
	Imports     []Import
	Funcs       []Func
	MemoryPages uint32
}

// Bytes assembles the module. Function indices count imports first, so the
// first defined function is index len(Imports).
func (m Module) Bytes() []byte {
	out := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

	var types [][]byte
	for _, im := range m.Imports {
		types = append(types, funcType(im.Params, im.Results))
	}
	for _, f := range m.Funcs {
		types = append(types, funcType(f.Params, f.Results))
	}
	out = section(out, 1, vector(types))

	var imports [][]byte
	for i, im := range m.Imports {
		b := name(nil, im.Module)
		b = name(b, im.Name)
		b = append(b, 0x00) // function
		imports = append(imports, uleb(b, uint64(i)))
	}
	out = section(out, 2, vector(imports))

	var funcs [][]byte
	for i := range m.Funcs {
		funcs = append(funcs, uleb(nil, uint64(len(m.Imports)+i)))
	}
	out = section(out, 3, vector(funcs))

	var table [][]byte
	for i, f := range m.Funcs {
		if f.InTable {
			table = append(table, uleb(nil, uint64(len(m.Imports)+i)))
		}
	}
	if len(table) > 0 {
		out = section(out, 4, vector([][]byte{uleb([]byte{0x70, 0x00}, uint64(len(table)))}))
	}

	if m.MemoryPages > 0 {
		out = section(out, 5, vector([][]byte{uleb([]byte{0x00}, uint64(m.MemoryPages))}))
	}

	var exports [][]byte
	for i, f := range m.Funcs {
		if f.Export != "" {
			b := name(nil, f.Export)
			exports = append(exports, uleb(append(b, 0x00), uint64(len(m.Imports)+i)))
		}
	}
	if m.MemoryPages > 0 {
		exports = append(exports, append(name(nil, "memory"), 0x02, 0x00))
	}
	out = section(out, 7, vector(exports))

	for i, f := range m.Funcs {
		if f.Start {
			out = section(out, 8, uleb(nil, uint64(len(m.Imports)+i)))
		}
	}
	if len(table) > 0 {
		segment := append([]byte{0x00}, I32Const(0)...) // active, table 0, at 0
		out = section(out, 9, vector([][]byte{append(append(segment, 0x0b), vector(table)...)}))
	}

	var bodies [][]byte
	for _, f := range m.Funcs {
		var locals [][]byte
		for _, t := range f.Locals {
			locals = append(locals, []byte{0x01, t})
		}
		body := append(vector(locals), f.Body...)
		body = append(body, 0x0b)
		bodies = append(bodies, append(uleb(nil, uint64(len(body))), body...))
	}
	return section(out, 10, vector(bodies))
}

func funcType(params, results []byte) []byte {
	b := []byte{0x60}
	b = uleb(b, uint64(len(params)))
	b = append(b, params...)
	b = uleb(b, uint64(len(results)))
	return append(b, results...)
}

func vector(items [][]byte) []byte {
	b := uleb(nil, uint64(len(items)))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

func section(out []byte, id byte, content []byte) []byte {
	out = append(out, id)
	out = uleb(out, uint64(len(content)))
	return append(out, content...)
}

func name(b []byte, s string) []byte { return append(uleb(b, uint64(len(s))), s...) }

func uleb(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// Instructions.

// I32Const pushes v.
func I32Const(v int32) []byte { return sleb([]byte{0x41}, int64(v)) }

// I64Const pushes v.
func I64Const(v int64) []byte { return sleb([]byte{0x42}, v) }

// Call calls function index idx.
func Call(idx uint32) []byte { return uleb([]byte{0x10}, uint64(idx)) }

// CallIndirect calls the table's entry whose index is on the stack, as a
// function of the type of function index typeOf: every import and
// function has a type of its own, numbered as the functions are.
func CallIndirect(typeOf uint32) []byte { return append(uleb([]byte{0x11}, uint64(typeOf)), 0x00) }

// LocalGet pushes local i.
func LocalGet(i uint32) []byte { return uleb([]byte{0x20}, uint64(i)) }

// Drop discards the top of the stack.
var Drop = []byte{0x1a}

// Unreachable traps.
var Unreachable = []byte{0x00}

// LoopForever never returns.
var LoopForever = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b}

// Seq concatenates instructions.
func Seq(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func sleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// StoreBytes writes b to memory at addr, one i32.store8 per byte: enough to
// lay out a small result without a data section.
func StoreBytes(addr int32, b []byte) []byte {
	var out []byte
	for i, c := range b {
		out = append(out, I32Const(addr+int32(i))...)
		out = append(out, I32Const(int32(c))...)
		out = append(out, 0x3a, 0x00, 0x00)
	}
	return out
}

// GrowMemoryToLimit grows memory one page at a time until memory.grow
// refuses, writing every byte of each new page so that the host really
// backs it: a guest whose heap grows to its cap.
var GrowMemoryToLimit = Seq(
	[]byte{0x02, 0x40, 0x03, 0x40},  // block, loop
	I32Const(1), []byte{0x40, 0x00}, // memory.grow 1
	I32Const(-1), []byte{0x46, 0x0d, 0x01}, // i32.eq, br_if 1 (out of the block)
	[]byte{0x3f, 0x00}, I32Const(1), []byte{0x6b}, I32Const(16), []byte{0x74}, // (memory.size - 1) << 16
	I32Const(1), I32Const(1<<16), []byte{0xfc, 0x0b, 0x00}, // memory.fill with 1, one page
	[]byte{0x0c, 0x00, 0x0b, 0x0b}, // br 0 (loop again), end loop, end block
)
