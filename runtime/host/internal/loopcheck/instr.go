package loopcheck

import (
	"errors"
	"fmt"
)

// Opcodes the rewrite reads or writes.
const (
	opUnreachable  = 0x00
	opBlock        = 0x02
	opLoop         = 0x03
	opIf           = 0x04
	opEnd          = 0x0b
	opBr           = 0x0c
	opReturn       = 0x0f
	opCall         = 0x10
	opCallIndirect = 0x11
	opReturnCall   = 0x12
	opReturnCallIn = 0x13
	opLocalGet     = 0x20
	opLocalTee     = 0x22
	opGlobalGet    = 0x23
	opGlobalSet    = 0x24
	opI32Const     = 0x41
	opI64Const     = 0x42
	opI32LtS       = 0x48
	opI32Add       = 0x6a
	opI32Sub       = 0x6b
	opI32Or        = 0x72
	opI32ShrU      = 0x76
	opI32WrapI64   = 0xa7
	opI64ExtendU   = 0xad
	opRefFunc      = 0xd2
	opPrefixFC     = 0xfc
	opPrefixFD     = 0xfd
	opPrefixFE     = 0xfe

	blockEmpty = 0x40
)

// The 0xFC instructions whose last operand is a count of bytes or
// elements they move or fill.
var bulkCounted = map[uint32]string{
	8:  "memory.init",
	10: "memory.copy",
	11: "memory.fill",
	12: "table.init",
	14: "table.copy",
	15: "table.grow",
	17: "table.fill",
}

// instr is one decoded instruction: its opcode, the sub-opcode of a
// prefixed one, and the index of a call, ref.func or global access.
type instr struct {
	op  byte
	sub uint32
	idx uint32
}

// bulk reports whether the instruction is one bulkCounted lists.
func (in instr) bulk() bool {
	_, ok := bulkCounted[in.sub]
	return in.op == opPrefixFC && ok
}

// next decodes the instruction at r.pos and skips its immediates, failing
// on one this package does not know.
func (r *reader) next() instr {
	in := instr{op: r.byte()}
	op := in.op
	switch {
	case op == opBlock, op == opLoop, op == opIf:
		r.blockType()
	case op == opCall, op == opRefFunc, op == opGlobalGet, op == opGlobalSet:
		in.idx = r.u32()
	case op == opReturnCall, op == opReturnCallIn:
		r.fail(errors.New("tail calls (return_call) are not supported"))
	case op <= 0x01, op == 0x05, op == opEnd, op == opReturn, op == 0x1a, op == 0x1b, op == 0xd1,
		0x45 <= op && op <= 0xc4:
		// no immediates
	case op == opBr, op == 0x0d, // br, br_if
		0x20 <= op && op <= 0x26, // local.*, table.get/set
		op == 0x3f, op == 0x40:   // memory.size, memory.grow
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for range n {
			r.u32()
		}
		r.u32()
	case op == opCallIndirect:
		r.u32()
		r.u32()
	case op == 0x1c: // select with types
		n := r.u32()
		r.bytes(int(n))
	case 0x28 <= op && op <= 0x3e:
		r.memarg()
	case op == opI32Const:
		r.sleb(32)
	case op == opI64Const:
		r.sleb(64)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null
		r.byte()
	case op == opPrefixFC:
		in.sub = r.u32()
		r.prefixedFC(in.sub)
	case op == opPrefixFD:
		in.sub = r.u32()
		r.prefixedFD(in.sub)
	case op == opPrefixFE:
		if in.sub = r.u32(); in.sub == 0x03 { // atomic.fence
			r.byte()
		} else {
			r.memarg()
		}
	default:
		r.fail(fmt.Errorf("unknown instruction %#x at offset %d", op, r.pos-1))
	}
	return in
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
	if r.pos < len(r.b) && (r.b[r.pos] == blockEmpty || r.b[r.pos]&0xc0 == 0x40) {
		r.pos++ // 0x40 or a one-byte value type (0x40..0x7f)
		return
	}
	r.sleb(33)
}
