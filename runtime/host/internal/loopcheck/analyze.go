package loopcheck

import (
	"errors"
	"fmt"
)

// Section IDs of the binary format.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secDataCount = 12
)

// sectionRank is each known section's place in a module, which the
// binary format fixes (the data count section comes before the code).
var sectionRank = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 12: 10, 10: 11, 11: 12}

type section struct {
	id   byte
	body []byte
}

type funcType struct{ params, results []byte }

// function is what the rewrite knows of a function, imported or defined.
type function struct {
	typ uint32
	// Of a defined function: the length of its body, whether it has a
	// loop, a call of any kind, or a bulk instruction.
	size                int
	defined             bool
	loops, calls, bulks bool
	// referenced: a table or ref.func can reach it, so that it may be
	// called through call_indirect from anywhere.
	referenced bool
}

// leaf reports whether f is charged where it is called, not at its own
// entry: it has no loop and no call, so it runs at most its own length of
// code, and only direct calls reach it.
func (f *function) leaf() bool { return f.defined && !f.loops && !f.calls && !f.referenced }

// rewrite holds what the rewrite reads of a module before it writes it.
type rewrite struct {
	opts Options

	types                                  []funcType
	funcs                                  []function // imports first, as the module numbers them
	funcImports, globalImports, numGlobals uint32
	exports                                map[string]uint32 // function exports
	// importsReferenced: an imported function is in a table, so that
	// call_indirect may reach the host.
	importsReferenced bool

	// Types the rewrite adds after the module's own: the check's, the
	// enter function's, and the block types of the multi-value results
	// of instrumented functions.
	addedTypes  [][]byte
	resultTypes map[string]uint32

	maxFrame int
}

// Indices of what the rewrite adds.
func (m *rewrite) checkType() uint32 { return uint32(len(m.types)) }
func (m *rewrite) enterType() uint32 { return uint32(len(m.types)) + 1 }
func (m *rewrite) checkFunc() uint32 { return m.funcImports }
func (m *rewrite) enterFunc() uint32 { return uint32(len(m.funcs)) + 1 }
func (m *rewrite) budget() uint32    { return m.globalImports + m.numGlobals }
func (m *rewrite) stack() uint32     { return m.budget() + 1 }

// function renumbers a function index: the import comes after the
// module's own function imports and before its defined functions.
func (m *rewrite) function(i uint32) uint32 {
	if i >= m.funcImports {
		return i + 1
	}
	return i
}

// global refuses a reference to a global the module does not have. The
// counters take the first indices past the module's globals, so such a
// reference, invalid as written, would reach them once rewritten: a module
// that kept setting them would never call the check, and never stop.
func (m *rewrite) global(r *reader, i uint32) {
	if i >= m.budget() {
		r.fail(fmt.Errorf("reference to global %d, past the module's %d", i, m.budget()))
	}
}

// read learns what the rewrite needs of the module: types, functions, what
// tables reach, and what each function's code does.
func (m *rewrite) read(sections []section) error {
	m.exports = map[string]uint32{}
	for _, s := range sections {
		r := &reader{b: s.body}
		switch s.id {
		case secType:
			n := r.u32()
			for range n {
				if form := r.byte(); form != 0x60 && r.err == nil {
					return fmt.Errorf("type of unknown form %#x", form)
				}
				m.types = append(m.types, funcType{params: r.valueTypes(), results: r.valueTypes()})
			}
		case secImport:
			n := r.u32()
			for range n {
				r.name()
				r.name()
				switch kind := r.byte(); kind {
				case 0: // function
					m.funcs = append(m.funcs, function{typ: r.u32()})
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
		case secFunction:
			n := r.u32()
			for range n {
				m.funcs = append(m.funcs, function{typ: r.u32(), defined: true})
			}
		case secGlobal:
			m.numGlobals = r.u32()
		}
		if r.err != nil {
			return fmt.Errorf("section %d: %w", s.id, r.err)
		}
	}
	for i := range m.funcs {
		if m.funcs[i].typ >= uint32(len(m.types)) {
			return fmt.Errorf("function %d has type %d, past the module's %d", i, m.funcs[i].typ, len(m.types))
		}
	}
	// Then what refers to functions, which needs their count.
	for _, s := range sections {
		r := &reader{b: s.body}
		var err error
		switch s.id {
		case secGlobal:
			n := r.u32()
			for range n {
				r.bytes(2)
				m.constExpr(r, &writer{}, m.reference)
			}
		case secExport:
			n := r.u32()
			for range n {
				name := r.name()
				kind := r.byte()
				idx := r.u32()
				if kind == 0 {
					m.exports[name] = idx
				}
			}
		case secElement:
			m.elements(r, &writer{}, m.reference)
		case secCode:
			err = m.readCode(r)
		}
		if r.err != nil {
			err = r.err
		}
		if err != nil {
			return fmt.Errorf("section %d: %w", s.id, err)
		}
	}
	if _, taken := m.exports[EnterExport]; taken {
		return fmt.Errorf("the module exports %s, a name the host reserves", EnterExport)
	}
	m.resultTypes = map[string]uint32{}
	m.addedTypes = [][]byte{
		{0x60, 1, 0x7f, 0},                   // check: (i32) -> ()
		{0x60, 3, 0x7f, 0x7e, 0x7e, 1, 0x7e}, // enter: (i32, i64, i64) -> (i64)
	}
	for i := range m.funcs {
		f := &m.funcs[i]
		if !f.defined {
			continue
		}
		t := m.types[f.typ]
		m.maxFrame = max(m.maxFrame, FrameBytes(f.size, len(t.params), len(t.results)))
		if key := string(t.results); len(t.results) > 1 && !f.leaf() && m.resultTypes[key] == 0 {
			m.resultTypes[key] = uint32(len(m.types) + len(m.addedTypes))
			w := &writer{}
			w.raw(0x60, 0)
			w.u32(uint32(len(t.results)))
			w.raw(t.results...)
			m.addedTypes = append(m.addedTypes, w.b)
		}
	}
	return nil
}

// reference records that a table or ref.func reaches function i; it
// returns i unchanged, as elements and constExpr expect of a renumbering.
func (m *rewrite) reference(i uint32) uint32 {
	if i < uint32(len(m.funcs)) {
		m.funcs[i].referenced = true
		if i < m.funcImports {
			m.importsReferenced = true
		}
	}
	return i
}

// readCode reads what each function body does.
func (m *rewrite) readCode(r *reader) error {
	n := r.u32()
	if int(n) != len(m.funcs)-int(m.funcImports) {
		return fmt.Errorf("%d function bodies for %d functions", n, len(m.funcs)-int(m.funcImports))
	}
	for i := range n {
		size := r.u32()
		if r.err != nil || int(size) > len(r.b)-r.pos {
			return errors.New("truncated function body")
		}
		f := &m.funcs[m.funcImports+i]
		f.size = int(size)
		br := &reader{b: r.b[r.pos : r.pos+int(size)]}
		r.pos += int(size)
		groups := br.u32()
		for range groups {
			br.u32()
			br.byte()
		}
		for depth := 0; br.err == nil; {
			if br.pos >= len(br.b) {
				return errors.New("code ends without end")
			}
			in := br.next()
			switch {
			case in.op == opBlock, in.op == opIf:
				depth++
			case in.op == opLoop:
				depth++
				f.loops = true
			case in.op == opEnd:
				depth--
			case in.op == opCall:
				if in.idx >= uint32(len(m.funcs)) {
					return fmt.Errorf("call of function %d, past the module's %d", in.idx, len(m.funcs))
				}
				f.calls = true
			case in.op == opCallIndirect:
				f.calls = true
			case in.op == opRefFunc:
				m.reference(in.idx)
			case in.bulk():
				f.bulks = true
			}
			if depth < 0 {
				break
			}
		}
		if br.err != nil {
			return br.err
		}
	}
	return nil
}

// elements copies an element section's segments, mapping their function
// indices through fn.
func (m *rewrite) elements(r *reader, w *writer, fn func(uint32) uint32) {
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
			m.constExpr(r, w, fn)
		}
		if flags&3 != 0 { // an element kind or reference type
			w.raw(r.byte())
		}
		count := r.u32()
		w.u32(count)
		for range count {
			if flags&4 != 0 {
				m.constExpr(r, w, fn)
			} else {
				w.u32(fn(r.u32()))
			}
		}
	}
}

// constExpr copies a constant expression, up to and with its end, mapping
// the index of a ref.func through fn.
func (m *rewrite) constExpr(r *reader, w *writer, fn func(uint32) uint32) {
	for r.err == nil {
		start := r.pos
		in := r.next()
		switch in.op {
		case opEnd:
			w.raw(opEnd)
			return
		case opRefFunc:
			w.raw(opRefFunc)
			w.u32(fn(in.idx))
			continue
		case opGlobalGet, opGlobalSet:
			m.global(r, in.idx)
		}
		w.raw(r.b[start:r.pos]...)
	}
}
