package loopcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Options are what the rewrite bakes into the module.
type Options struct {
	// StackBytes bounds the frame estimates (FrameBytes) of the calls one
	// entry into the guest has in progress at once.
	StackBytes int32
	// Entries are the exports EnterExport reaches, each by its index here.
	Entries []string
}

// Instrument returns wasm rewritten as the package says, and the largest
// frame estimate of its functions: a call can hold up to that much stack
// past Options.StackBytes, the frame that finds the bound spent.
func Instrument(wasm []byte, opts Options) (out []byte, maxFrame int, err error) {
	if opts.StackBytes <= 0 {
		return nil, 0, errors.New("no stack bound")
	}
	r := &reader{b: wasm}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || binary.LittleEndian.Uint32(wasm[4:8]) != 1 {
		return nil, 0, errors.New("not a Wasm binary module of version 1")
	}
	r.pos = 8
	var sections []section
	for r.pos < len(r.b) {
		id := r.byte()
		if _, known := sectionRank[id]; !known && id != secCustom {
			return nil, 0, fmt.Errorf("unknown section %d", id)
		}
		size := r.u32()
		if r.err != nil || int(size) > len(r.b)-r.pos {
			return nil, 0, errors.New("truncated section")
		}
		sections = append(sections, section{id: id, body: r.b[r.pos : r.pos+int(size)]})
		r.pos += int(size)
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	m := &rewrite{opts: opts}
	if err := m.read(sections); err != nil {
		return nil, 0, err
	}
	out = append(make([]byte, 0, len(wasm)+len(wasm)/4), wasm[:8]...) // room for the countdowns
	add := func(id byte, body []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	// The sections this rewrite adds to, in their order; a module without
	// one gets it before the first section that follows it.
	needed := []byte{secType, secImport, secFunction, secGlobal, secExport, secCode}
	seen := map[byte]bool{}
	addMissing := func(before int) error {
		for _, id := range needed {
			if seen[id] || sectionRank[id] >= before {
				continue
			}
			if id == secFunction || id == secCode {
				return errors.New("the module defines no functions")
			}
			seen[id] = true
			body, _, err := m.section(section{id: id})
			if err != nil {
				return err
			}
			add(id, body)
		}
		return nil
	}
	for _, s := range sections {
		if s.id != secCustom {
			if err := addMissing(sectionRank[s.id]); err != nil {
				return nil, 0, err
			}
			seen[s.id] = true
		}
		body, keep, err := m.section(s)
		if err != nil {
			return nil, 0, fmt.Errorf("section %d: %w", s.id, err)
		}
		if keep {
			add(s.id, body)
		}
	}
	if err := addMissing(len(sectionRank) + 1); err != nil {
		return nil, 0, err
	}
	return out, m.maxFrame, nil
}

// section rewrites one section (an empty body for a section the module
// lacks); keep is false for a section to drop.
func (m *rewrite) section(s section) (body []byte, keep bool, err error) {
	r := &reader{b: s.body}
	w := &writer{}
	switch s.id {
	case secType:
		return appendVec(s.body, m.addedTypes...), true, nil
	case secImport:
		imp := &writer{}
		imp.name(ImportModule)
		imp.name(ImportName)
		imp.raw(0) // a function
		imp.u32(m.checkType())
		return appendVec(s.body, imp.b), true, nil
	case secFunction:
		t := &writer{}
		t.u32(m.enterType())
		return appendVec(s.body, t.b), true, nil
	case secGlobal:
		if len(s.body) > 0 {
			n := r.u32()
			w.u32(n)
			for range n {
				w.raw(r.bytes(2)...) // type and mutability
				m.constExpr(r, w, m.function)
			}
			if err := r.done(); err != nil {
				return nil, false, err
			}
		}
		// The budget and the stack: mutable i32s.
		budget := append(appendSleb([]byte{0x7f, 1, opI32Const}, Budget), opEnd)
		stack := append(appendSleb([]byte{0x7f, 1, opI32Const}, int64(m.opts.StackBytes)), opEnd)
		return appendVec(w.b, budget, stack), true, nil
	case secExport:
		if len(s.body) > 0 {
			n := r.u32()
			w.u32(n)
			for range n {
				w.name(r.name())
				kind := r.byte()
				w.raw(kind)
				idx := r.u32()
				switch kind {
				case 0:
					idx = m.function(idx)
				case 3:
					m.global(r, idx)
				}
				w.u32(idx)
			}
			if err := r.done(); err != nil {
				return nil, false, err
			}
		}
		enter := &writer{}
		enter.name(EnterExport)
		enter.raw(0)
		enter.u32(m.enterFunc())
		return appendVec(w.b, enter.b), true, nil
	case secStart:
		w.u32(m.function(r.u32()))
	case secElement:
		m.elements(r, w, m.function)
	case secCode:
		w.b = make([]byte, 0, len(s.body)+len(s.body)/4)
		fw := &writer{} // one function's code, reused
		n := r.u32()
		w.u32(n + 1)
		for i := range n {
			size := r.u32()
			fr := &reader{b: r.b[r.pos : r.pos+int(size)]} // readCode checked the sizes
			r.pos += int(size)
			fw.b = fw.b[:0]
			m.funcBody(m.funcImports+i, fr, fw)
			if fr.err != nil {
				return nil, false, fmt.Errorf("function %d: %w", m.funcImports+i, fr.err)
			}
			w.u32(uint32(len(fw.b)))
			w.raw(fw.b...)
		}
		w.raw(m.enterBody()...)
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
		case 1: // function names: a name map, with the entry's last
			n := sub.u32()
			sw.u32(n + 1)
			for range n {
				sw.u32(m.function(sub.u32()))
				sw.name(sub.name())
			}
			sw.u32(m.enterFunc())
			sw.name(EnterExport)
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
			sw.raw(sub.b...)
			sub.pos = len(sub.b)
		}
		if sub.err != nil || sub.pos != len(sub.b) {
			return head
		}
		w.raw(id)
		w.u32(uint32(len(sw.b)))
		w.raw(sw.b...)
	}
	return w.b
}
