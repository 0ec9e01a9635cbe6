// Package loopcheck rewrites a Wasm module so that its loops call the host
// now and then, which is where the host stops a call whose deadline has
// passed.
//
// wazero stops such a call by checking, at every loop header, whether the
// module was closed; with WithCloseOnContextDone each check is an exit
// from the compiled code into Go. Guest code is mostly loops over bytes
// (decoding, comparing, copying strings), and that check came to several
// times what the loops themselves cost (BENCHMARKS.md has the figures).
// A module rewritten here counts what its loops run against a budget
// in a global of its own, inline, and calls the imported check only when
// the budget is spent; the host compiles it without wazero's check and
// stops it from the import. The check also hands the goroutine back to the
// Go scheduler, which a stop-the-world collection waits for, as wazero's
// does at every turn.
//
// The rewrite adds a type, an import, a global and the countdown at each
// loop header, and renumbers what refers to functions (calls, exports, the
// start function, element segments, ref.func, the name section), since
// the import comes before every function the module defines. DWARF
// sections, whose code offsets move, are dropped. A module with an
// instruction or section the rewrite does not know is refused with an
// error, and the host runs it under wazero's check.
package loopcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// The import the rewritten module calls, of type () -> ().
const (
	ImportModule = "wasmccm-loopcheck"
	ImportName   = "check"
)

// Budget is how much loop the guest runs between two calls to the
// import, counted in bytes of code: each turn of a loop costs the loop's
// length. A tight loop then calls the host every few tens of thousands of
// turns, and a loop with a long body every few turns, so that the time
// between two calls stays about the same whatever the loop.
const Budget = 1 << 20

// Section IDs of the binary format.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secDataCount = 12
)

// Instrument returns wasm rewritten so that every loop header takes the
// loop's length from a new global and, once Budget is spent, refills it
// and calls ImportModule.ImportName.
func Instrument(wasm []byte) ([]byte, error) {
	r := &reader{b: wasm}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || binary.LittleEndian.Uint32(wasm[4:8]) != 1 {
		return nil, errors.New("not a Wasm binary module of version 1")
	}
	r.pos = 8
	var sections []section
	for r.pos < len(r.b) {
		id := r.byte()
		if id > secDataCount {
			return nil, fmt.Errorf("unknown section %d", id)
		}
		size := r.u32()
		if r.err != nil || int(size) > len(r.b)-r.pos {
			return nil, errors.New("truncated section")
		}
		sections = append(sections, section{id: id, body: r.b[r.pos : r.pos+int(size)]})
		r.pos += int(size)
	}
	if r.err != nil {
		return nil, r.err
	}
	m := &rewrite{}
	if err := m.count(sections); err != nil {
		return nil, err
	}
	out := append(make([]byte, 0, len(wasm)+len(wasm)/4), wasm[:8]...) // room for the countdowns
	add := func(id byte, body []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	sawType, sawImport, sawGlobal := false, false, false
	for _, s := range sections {
		// Sections this rewrite adds to must exist in their place; a module
		// without one gets it before the first section that follows it.
		if !sawType && s.id != secCustom && s.id > secType {
			add(secType, m.addType(nil))
			sawType = true
		}
		if !sawImport && s.id != secCustom && s.id > secImport {
			add(secImport, m.addImport(nil))
			sawImport = true
		}
		if !sawGlobal && s.id != secCustom && s.id > secGlobal {
			add(secGlobal, m.addGlobal(nil))
			sawGlobal = true
		}
		body, keep, err := m.section(s)
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, err)
		}
		switch s.id {
		case secType:
			sawType = true
		case secImport:
			sawImport = true
		case secGlobal:
			sawGlobal = true
		}
		if keep {
			add(s.id, body)
		}
	}
	if !sawType {
		add(secType, m.addType(nil))
	}
	if !sawImport {
		add(secImport, m.addImport(nil))
	}
	if !sawGlobal {
		add(secGlobal, m.addGlobal(nil))
	}
	return out, nil
}

type section struct {
	id   byte
	body []byte
}

// rewrite holds the counts the indices of what it adds derive from.
type rewrite struct {
	numTypes, funcImports, globalImports, numGlobals uint32
}

// Indices of what the rewrite adds.
func (m *rewrite) checkType() uint32 { return m.numTypes }
func (m *rewrite) checkFunc() uint32 { return m.funcImports }
func (m *rewrite) counter() uint32   { return m.globalImports + m.numGlobals }

// function renumbers a function index: the import comes after the
// module's own function imports and before its defined functions.
func (m *rewrite) function(i uint32) uint32 {
	if i >= m.funcImports {
		return i + 1
	}
	return i
}

// global refuses a reference to a global the module does not have. The
// counter takes the first index past the module's globals, so such a
// reference, invalid as written, would reach it once rewritten: a module
// that kept setting it would never call the check, and never stop.
func (m *rewrite) global(r *reader, i uint32) {
	if i >= m.counter() {
		r.fail(fmt.Errorf("reference to global %d, past the module's %d", i, m.counter()))
	}
}

// count reads the counts the new indices derive from.
func (m *rewrite) count(sections []section) error {
	for _, s := range sections {
		r := &reader{b: s.body}
		switch s.id {
		case secType:
			m.numTypes = r.u32()
		case secImport:
			n := r.u32()
			for range n {
				r.name()
				r.name()
				switch kind := r.byte(); kind {
				case 0: // function
					r.u32()
					m.funcImports++
				case 1: // table
					r.byte()
					r.limits()
				case 2: // memory
					r.limits()
				case 3: // global
					r.byte()
					r.byte()
					m.globalImports++
				default:
					return fmt.Errorf("import of unknown kind %#x", kind)
				}
			}
		case secGlobal:
			m.numGlobals = r.u32()
		}
		if r.err != nil {
			return fmt.Errorf("section %d: %w", s.id, r.err)
		}
	}
	return nil
}

// addType appends the check's type, () -> (), to a type section's body.
func (m *rewrite) addType(body []byte) []byte { return appendVec(body, []byte{0x60, 0, 0}) }

// addImport appends the check's import to an import section's body.
func (m *rewrite) addImport(body []byte) []byte {
	w := &writer{}
	w.name(ImportModule)
	w.name(ImportName)
	w.raw([]byte{0}) // a function
	w.u32(m.checkType())
	return appendVec(body, w.b)
}

// addGlobal appends the counter, a mutable i32 starting at Budget, to a
// global section's body.
func (m *rewrite) addGlobal(body []byte) []byte {
	entry := appendSleb([]byte{0x7f, 1, 0x41}, Budget)
	return appendVec(body, append(entry, 0x0b))
}

// appendVec appends entry to the vector that is a section's body (empty
// when the module has no such section), counting it.
func appendVec(body, entry []byte) []byte {
	r := &reader{b: body}
	var n uint32
	if len(body) > 0 {
		n = r.u32()
	}
	out := binary.AppendUvarint(nil, uint64(n)+1)
	out = append(out, body[r.pos:]...)
	return append(out, entry...)
}

// section rewrites one section; keep is false for a section to drop.
func (m *rewrite) section(s section) (body []byte, keep bool, err error) {
	r := &reader{b: s.body}
	w := &writer{}
	switch s.id {
	case secType:
		return m.addType(s.body), true, nil
	case secImport:
		return m.addImport(s.body), true, nil
	case secGlobal:
		n := r.u32()
		w.u32(n)
		for range n {
			w.raw(r.bytes(2)) // type and mutability
			m.expr(r, w)
		}
		if r.err == nil {
			return m.addGlobal(w.b), true, r.done()
		}
	case secExport:
		n := r.u32()
		w.u32(n)
		for range n {
			w.name(r.name())
			kind := r.byte()
			w.raw([]byte{kind})
			idx := r.u32()
			switch kind {
			case 0:
				idx = m.function(idx)
			case 3:
				m.global(r, idx)
			}
			w.u32(idx)
		}
	case secStart:
		w.u32(m.function(r.u32()))
	case secElement:
		m.elements(r, w)
	case secCode:
		w.b = make([]byte, 0, len(s.body)+len(s.body)/4)
		fw := &writer{} // one function's code, reused
		n := r.u32()
		w.u32(n)
		for range n {
			size := r.u32()
			if r.err != nil || int(size) > len(r.b)-r.pos {
				return nil, false, errors.New("truncated function body")
			}
			fr := &reader{b: r.b[r.pos : r.pos+int(size)]}
			r.pos += int(size)
			fw.b = fw.b[:0]
			m.funcBody(fr, fw)
			if fr.err != nil {
				return nil, false, fr.err
			}
			w.u32(uint32(len(fw.b)))
			w.raw(fw.b)
		}
	case secCustom:
		name := r.name()
		switch {
		case r.err != nil:
			return nil, false, r.err
		case name == "name":
			return m.names(s.body[:r.pos], r), true, nil
		case strings.HasPrefix(name, ".debug_"):
			return nil, false, nil // its code offsets no longer hold
		}
		return s.body, true, nil
	default:
		return s.body, true, nil
	}
	if r.err != nil {
		return nil, false, r.err
	}
	return w.b, true, r.done()
}

// elements renumbers the functions of an element section's segments.
func (m *rewrite) elements(r *reader, w *writer) {
	n := r.u32()
	w.u32(n)
	for range n {
		flags := r.u32()
		w.u32(flags)
		if flags > 7 {
			r.fail(fmt.Errorf("element segment of unknown kind %d", flags))
			return
		}
		if flags&2 != 0 && flags&1 == 0 { // active with a table index
			w.u32(r.u32())
		}
		if flags&1 == 0 { // active: an offset
			m.expr(r, w)
		}
		if flags&3 != 0 { // an element kind or reference type
			w.raw([]byte{r.byte()})
		}
		count := r.u32()
		w.u32(count)
		for range count {
			if flags&4 != 0 {
				m.expr(r, w)
			} else {
				w.u32(m.function(r.u32()))
			}
		}
	}
}

// names renumbers the function, local and label names of a name section;
// head is the section's name, copied.
func (m *rewrite) names(head []byte, r *reader) []byte {
	w := &writer{b: append([]byte(nil), head...)}
	for r.pos < len(r.b) && r.err == nil {
		id := r.byte()
		size := r.u32()
		if r.err != nil || int(size) > len(r.b)-r.pos {
			return head // a malformed name section is dropped, as wazero ignores it
		}
		sub := &reader{b: r.b[r.pos : r.pos+int(size)]}
		r.pos += int(size)
		sw := &writer{}
		switch id {
		case 1: // function names: a name map
			n := sub.u32()
			sw.u32(n)
			for range n {
				sw.u32(m.function(sub.u32()))
				sw.name(sub.name())
			}
		case 2, 3: // local and label names: an indirect name map
			n := sub.u32()
			sw.u32(n)
			for range n {
				sw.u32(m.function(sub.u32()))
				inner := sub.u32()
				sw.u32(inner)
				for range inner {
					sw.u32(sub.u32())
					sw.name(sub.name())
				}
			}
		default:
			sw.raw(sub.b)
			sub.pos = len(sub.b)
		}
		if sub.err != nil || sub.pos != len(sub.b) {
			return head
		}
		w.raw([]byte{id})
		w.u32(uint32(len(sw.b)))
		w.raw(sw.b)
	}
	return w.b
}

// funcBody copies a function body: its locals, then its code.
func (m *rewrite) funcBody(r *reader, w *writer) {
	groups := r.u32()
	w.u32(groups)
	for range groups {
		w.u32(r.u32())
		w.raw([]byte{r.byte()})
	}
	m.code(r, w, false)
}

// expr copies a constant expression, up to and with its end.
func (m *rewrite) expr(r *reader, w *writer) { m.code(r, w, true) }

// code copies instructions up to the end that closes them, renumbering
// function indices and adding the countdown after every loop header. The
// countdown's cost, the loop's length in bytes, is known at the loop's
// end, and written then into the space left for it.
func (m *rewrite) code(r *reader, w *writer, constant bool) {
	type block struct {
		loop   bool
		start  int // the loop's offset in r
		costAt int // where its cost goes in w
	}
	var blocks []block
	for r.err == nil {
		if r.pos >= len(r.b) {
			r.fail(errors.New("code ends without end"))
			return
		}
		start := r.pos
		op := r.byte()
		switch {
		case op == 0x0b: // end
			w.raw(r.b[start:r.pos])
			if len(blocks) == 0 {
				return
			}
			if b := blocks[len(blocks)-1]; b.loop {
				putPaddedSleb(w.b[b.costAt:], int32(min(r.pos-b.start, Budget)))
			}
			blocks = blocks[:len(blocks)-1]
			continue
		case op == 0x02 || op == 0x04: // block, if
			r.blockType()
			blocks = append(blocks, block{})
		case op == 0x03: // loop
			r.blockType()
			w.raw(r.b[start:r.pos])
			b := block{loop: true, start: start}
			if !constant {
				b.costAt = m.countdown(w)
			}
			blocks = append(blocks, b)
			continue
		case op == 0x10 || op == 0x12 || op == 0xd2: // call, return_call, ref.func
			w.raw([]byte{op})
			w.u32(m.function(r.u32()))
			continue
		case op == 0x23 || op == 0x24: // global.get, global.set
			m.global(r, r.u32())
		default:
			r.immediates(op)
		}
		w.raw(r.b[start:r.pos])
	}
}

// countdown is the code at a loop header: take the loop's cost from the
// counter and, once it is spent, refill it and call the check. It returns
// where the cost is to be written.
func (m *rewrite) countdown(w *writer) (costAt int) {
	w.raw([]byte{0x23}) // global.get
	w.u32(m.counter())
	w.raw([]byte{0x41}) // i32.const
	costAt = len(w.b)
	w.raw(make([]byte, paddedSlebLen))
	w.raw([]byte{0x6b, 0x24}) // i32.sub, global.set
	w.u32(m.counter())
	w.raw([]byte{0x23}) // global.get
	w.u32(m.counter())
	w.raw([]byte{0x41, 0x00, 0x4c, 0x04, 0x40, 0x41}) // i32.const 0, i32.le_s, if (no result), i32.const
	w.b = appendSleb(w.b, Budget)
	w.raw([]byte{0x24}) // global.set
	w.u32(m.counter())
	w.raw([]byte{0x10}) // call
	w.u32(m.checkFunc())
	w.raw([]byte{0x0b}) // end
	return costAt
}

// paddedSlebLen is the length of a signed LEB128 written in a fixed space:
// five bytes hold any int32.
const paddedSlebLen = 5

func putPaddedSleb(b []byte, v int32) {
	for i := range paddedSlebLen - 1 {
		b[i] = byte(v>>(7*i))&0x7f | 0x80
	}
	b[paddedSlebLen-1] = byte(v>>(7*(paddedSlebLen-1))) & 0x7f
}

// immediates skips the immediates of an instruction other than those code
// handles itself, failing on one this package does not know.
func (r *reader) immediates(op byte) {
	switch {
	case op <= 0x01, op == 0x05, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1,
		0x45 <= op && op <= 0xc4:
		// no immediates
	case op == 0x0c, op == 0x0d, // br, br_if
		0x20 <= op && op <= 0x26, // local.*, global.*, table.get/set
		op == 0x3f, op == 0x40:   // memory.size, memory.grow
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for range n {
			r.u32()
		}
		r.u32()
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select with types
		n := r.u32()
		r.bytes(int(n))
	case 0x28 <= op && op <= 0x3e:
		r.memarg()
	case op == 0x41:
		r.sleb(32)
	case op == 0x42:
		r.sleb(64)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null
		r.byte()
	case op == 0xfc:
		r.prefixedFC(r.u32())
	case op == 0xfd:
		r.prefixedFD(r.u32())
	case op == 0xfe:
		if sub := r.u32(); sub == 0x03 { // atomic.fence
			r.byte()
		} else {
			r.memarg()
		}
	default:
		r.fail(fmt.Errorf("unknown instruction %#x at offset %d", op, r.pos-1))
	}
}

// prefixedFC skips the immediates of the 0xFC instructions: saturating
// truncations, bulk memory and table operations.
func (r *reader) prefixedFC(sub uint32) {
	switch {
	case sub <= 7: // trunc_sat
	case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
		r.u32()
		r.u32()
	case sub == 9, sub == 11, sub == 13, 15 <= sub && sub <= 17: // data.drop, memory.fill, elem.drop, table.grow/size/fill
		r.u32()
	default:
		r.fail(fmt.Errorf("unknown instruction 0xfc %d", sub))
	}
}

// prefixedFD skips the immediates of the SIMD instructions.
func (r *reader) prefixedFD(sub uint32) {
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads and stores
		r.memarg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case 21 <= sub && sub <= 34: // extract and replace lane
		r.byte()
	case 84 <= sub && sub <= 91: // load and store lane
		r.memarg()
		r.byte()
	case sub <= 255:
		// no immediates
	default:
		r.fail(fmt.Errorf("unknown instruction 0xfd %d", sub))
	}
}

// reader reads the binary format; the first error sticks.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.pos = len(r.b)
}

func (r *reader) done() error {
	if r.err == nil && r.pos != len(r.b) {
		return errors.New("section has bytes after its content")
	}
	return r.err
}

func (r *reader) byte() byte {
	if r.pos >= len(r.b) {
		r.fail(errors.New("unexpected end"))
		return 0
	}
	r.pos++
	return r.b[r.pos-1]
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.pos {
		r.fail(errors.New("unexpected end"))
		return nil
	}
	r.pos += n
	return r.b[r.pos-n : r.pos]
}

func (r *reader) u32() uint32 {
	v, n := binary.Uvarint(r.b[min(r.pos, len(r.b)):])
	if n <= 0 || n > 5 || v > 1<<32-1 {
		r.fail(errors.New("invalid unsigned LEB128"))
		return 0
	}
	r.pos += n
	return uint32(v)
}

// sleb skips a signed LEB128 of at most bits bits.
func (r *reader) sleb(bits int) {
	for i := 0; i < (bits+6)/7; i++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.fail(errors.New("invalid signed LEB128"))
}

func (r *reader) name() string { return string(r.bytes(int(r.u32()))) }

func (r *reader) limits() {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

// memarg skips an alignment and offset, and the memory index that bit 6
// of the alignment announces (multiple memories).
func (r *reader) memarg() {
	if align := r.u32(); align&0x40 != 0 {
		r.u32()
	}
	r.u32()
}

// blockType skips a block type: empty, a value type, or a type index.
func (r *reader) blockType() {
	if r.pos < len(r.b) && (r.b[r.pos] == 0x40 || r.b[r.pos]&0xc0 == 0x40) {
		r.pos++ // 0x40 or a one-byte value type (0x40..0x7f)
		return
	}
	r.sleb(33)
}

type writer struct{ b []byte }

func (w *writer) raw(b []byte) { w.b = append(w.b, b...) }
func (w *writer) u32(v uint32) { w.b = binary.AppendUvarint(w.b, uint64(v)) }
func (w *writer) name(s string) {
	w.u32(uint32(len(s)))
	w.b = append(w.b, s...)
}

func appendSleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
