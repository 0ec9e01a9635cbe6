package loopcheck

import "errors"

// funcBody rewrites the body of function f: its locals, with a scratch
// local for the cost of bulk instructions when it has any, then its code.
func (m *rewrite) funcBody(f uint32, r *reader, w *writer) {
	fn := &m.funcs[f]
	t := m.types[fn.typ]
	groups := r.u32()
	if fn.bulks {
		w.u32(groups + 1)
	} else {
		w.u32(groups)
	}
	locals := uint64(len(t.params))
	for range groups {
		n := r.u32()
		locals += uint64(n)
		w.u32(n)
		w.raw(r.byte())
	}
	c := &coder{m: m, r: r, w: w, instrumented: !fn.leaf()}
	if fn.bulks {
		if locals >= 1<<32-1 {
			r.fail(errors.New("too many locals"))
			return
		}
		c.scratch = uint32(locals)
		w.u32(1)
		w.raw(0x7f) // i32
	}
	c.frame = int32(min(FrameBytes(fn.size, len(t.params), len(t.results)), 1<<30))
	c.code(t)
}

// coder rewrites one function's code.
type coder struct {
	m *rewrite
	r *reader
	w *writer
	// instrumented: the function takes its own cost and frame at entry,
	// and gives its frame back when it returns.
	instrumented bool
	frame        int32
	scratch      uint32 // the local that holds a bulk instruction's count

	blocks []block
	// entryCost is what the function runs outside its loops besides its
	// own length: the leaves and host functions it calls there.
	entryCost   int
	entryCostAt int
}

type block struct {
	loop  bool
	start int // a loop's offset in r
	// costAt is where a loop's cost goes in w, known at its end: its
	// length, and cost, the leaves and host functions it calls.
	costAt, cost int
}

// code copies instructions up to the end of the function, renumbering
// function indices and adding the countdowns: at the entry, after every
// loop header and before every bulk instruction. An instrumented
// function's code is put in a block whose end gives the frame back; its
// returns become branches to that end.
func (c *coder) code(t funcType) {
	r, w, m := c.r, c.w, c.m
	start := r.pos
	if c.instrumented {
		c.entry()
		c.resultBlock(t)
	}
	for r.err == nil {
		if r.pos >= len(r.b) {
			r.fail(errors.New("code ends without end"))
			return
		}
		at := r.pos
		in := r.next()
		if r.err != nil {
			return
		}
		switch {
		case in.op == opEnd && len(c.blocks) == 0:
			if c.instrumented {
				w.raw(opEnd) // the result block
				c.giveFrameBack()
				putPaddedSleb(w.b[c.entryCostAt:], int32(min(r.pos-start+c.entryCost, Budget)))
			}
			w.raw(opEnd)
			return
		case in.op == opEnd:
			b := c.blocks[len(c.blocks)-1]
			c.blocks = c.blocks[:len(c.blocks)-1]
			w.raw(opEnd)
			if b.loop {
				putPaddedSleb(w.b[b.costAt:], int32(min(r.pos-b.start+b.cost, Budget)))
			}
			continue
		case in.op == opBlock || in.op == opIf:
			c.blocks = append(c.blocks, block{})
		case in.op == opLoop:
			w.raw(r.b[at:r.pos]...)
			c.blocks = append(c.blocks, block{loop: true, start: at, costAt: c.loopCountdown()})
			continue
		case in.op == opReturn && c.instrumented:
			w.raw(opBr)
			w.u32(uint32(len(c.blocks))) // the result block
			continue
		case in.op == opCall:
			switch callee := &m.funcs[in.idx]; {
			case !callee.defined:
				c.charge(HostCallCost)
			case callee.leaf():
				c.charge(callee.size)
			}
			w.raw(opCall)
			w.u32(m.function(in.idx))
			continue
		case in.op == opCallIndirect && m.importsReferenced:
			c.charge(HostCallCost)
		case in.op == opRefFunc:
			w.raw(opRefFunc)
			w.u32(m.function(in.idx))
			continue
		case in.op == opGlobalGet || in.op == opGlobalSet:
			m.global(r, in.idx)
		case in.bulk():
			c.bulkCountdown()
		}
		w.raw(r.b[at:r.pos]...)
	}
}

// charge adds cost to what the innermost loop around the current
// instruction takes per turn, or to the function's entry outside loops.
func (c *coder) charge(cost int) {
	for i := len(c.blocks) - 1; i >= 0; i-- {
		if c.blocks[i].loop {
			c.blocks[i].cost += cost
			return
		}
	}
	c.entryCost += cost
}

// entry takes the function's cost from the budget and its frame from the
// stack, and calls the check when either is spent.
func (c *coder) entry() {
	w, m := c.w, c.m
	w.raw(opGlobalGet)
	w.u32(m.budget())
	c.entryCostAt = w.paddedConst()
	w.raw(opI32Sub, opGlobalSet)
	w.u32(m.budget())
	w.raw(opGlobalGet)
	w.u32(m.stack())
	w.i32Const(c.frame)
	w.raw(opI32Sub, opGlobalSet)
	w.u32(m.stack())
	w.raw(opGlobalGet)
	w.u32(m.budget())
	w.raw(opGlobalGet)
	w.u32(m.stack())
	w.raw(opI32Or)
	c.checkIfNegative()
}

// resultBlock opens the block around an instrumented function's code,
// typed by the function's results.
func (c *coder) resultBlock(t funcType) {
	w := c.w
	w.raw(opBlock)
	switch len(t.results) {
	case 0:
		w.raw(blockEmpty)
	case 1:
		w.raw(t.results[0])
	default:
		w.b = appendSleb(w.b, int64(c.m.resultTypes[string(t.results)]))
	}
}

// giveFrameBack returns the function's frame to the stack.
func (c *coder) giveFrameBack() {
	w, m := c.w, c.m
	w.raw(opGlobalGet)
	w.u32(m.stack())
	w.i32Const(c.frame)
	w.raw(opI32Add, opGlobalSet)
	w.u32(m.stack())
}

// loopCountdown is the code at a loop header: take the loop's cost from
// the budget, and call the check once it is spent. It returns where the
// cost is to be written.
func (c *coder) loopCountdown() (costAt int) {
	w, m := c.w, c.m
	w.raw(opGlobalGet)
	w.u32(m.budget())
	costAt = w.paddedConst()
	w.raw(opI32Sub, opGlobalSet)
	w.u32(m.budget())
	w.raw(opGlobalGet)
	w.u32(m.budget())
	c.checkIfNegative()
	return costAt
}

// bulkCountdown is the code before a bulk instruction, whose last operand
// is its count: take the count from the budget, shifted by bulkShift,
// leaving the operand in place.
func (c *coder) bulkCountdown() {
	w, m := c.w, c.m
	w.raw(opLocalTee)
	w.u32(c.scratch)
	w.raw(opGlobalGet)
	w.u32(m.budget())
	w.raw(opLocalGet)
	w.u32(c.scratch)
	w.i32Const(bulkShift)
	w.raw(opI32ShrU, opI32Sub, opGlobalSet)
	w.u32(m.budget())
	w.raw(opGlobalGet)
	w.u32(m.budget())
	c.checkIfNegative()
}

// checkIfNegative takes the value on top of the stack and, when it is
// negative, refills the budget and calls the check with what remains of
// the stack.
func (c *coder) checkIfNegative() {
	w, m := c.w, c.m
	w.i32Const(0)
	w.raw(opI32LtS, opIf, blockEmpty)
	w.i32Const(Budget)
	w.raw(opGlobalSet)
	w.u32(m.budget())
	w.raw(opGlobalGet)
	w.u32(m.stack())
	w.raw(opCall)
	w.u32(m.checkFunc())
	w.raw(opEnd)
}

// enterBody is the code of EnterExport: a br_table on the entry's index
// to a case per entry that calls its export.
func (m *rewrite) enterBody() []byte {
	w := &writer{}
	w.u32(0) // no locals
	n := uint32(len(m.opts.Entries))
	for range n + 1 {
		w.raw(opBlock, blockEmpty)
	}
	w.raw(opLocalGet, 0, 0x0e) // br_table
	w.u32(n)
	for i := range n + 1 {
		w.u32(i) // entry i ends block i; the default, block n
	}
	for _, name := range m.opts.Entries {
		w.raw(opEnd)
		m.enterCase(w, name)
	}
	w.raw(opEnd, opUnreachable, opEnd)
	return withLength(w.b)
}

// enterCase calls the export name with enter's parameters and returns its
// result as an i64; an export the module lacks, or whose type enter cannot
// pass (the host refuses the module for it), traps.
func (m *rewrite) enterCase(w *writer, name string) {
	idx, ok := m.exports[name]
	if !ok || idx >= uint32(len(m.funcs)) {
		w.raw(opUnreachable)
		return
	}
	t := m.types[m.funcs[idx].typ]
	if !passable(t) {
		w.raw(opUnreachable)
		return
	}
	for j, p := range t.params {
		w.raw(opLocalGet, byte(1+j))
		if p == 0x7f {
			w.raw(opI32WrapI64)
		}
	}
	w.raw(opCall)
	w.u32(m.function(idx))
	switch {
	case len(t.results) == 0:
		w.raw(opI64Const, 0)
	case t.results[0] == 0x7f:
		w.raw(opI64ExtendU)
	}
	w.raw(opReturn)
}

// passable reports whether enter can call a function of type t: at most
// two parameters and one result, each an i32 or i64.
func passable(t funcType) bool {
	integer := func(ts []byte) bool {
		for _, v := range ts {
			if v != 0x7f && v != 0x7e {
				return false
			}
		}
		return true
	}
	return len(t.params) <= 2 && len(t.results) <= 1 && integer(t.params) && integer(t.results)
}

// withLength prefixes b with its length, as a function body is written.
func withLength(b []byte) []byte {
	w := &writer{}
	w.u32(uint32(len(b)))
	return append(w.b, b...)
}
