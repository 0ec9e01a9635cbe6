package loopcheck

import (
	"encoding/binary"
	"errors"
)

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

// valueTypes reads a vector of value types.
func (r *reader) valueTypes() []byte {
	n := r.u32()
	return r.bytes(int(n))
}

type writer struct{ b []byte }

func (w *writer) raw(b ...byte) { w.b = append(w.b, b...) }
func (w *writer) u32(v uint32)  { w.b = binary.AppendUvarint(w.b, uint64(v)) }
func (w *writer) name(s string) {
	w.u32(uint32(len(s)))
	w.b = append(w.b, s...)
}

// i32Const writes i32.const v.
func (w *writer) i32Const(v int32) {
	w.raw(opI32Const)
	w.b = appendSleb(w.b, int64(v))
}

// paddedConst writes i32.const with room for a value written later
// (putPaddedSleb), returning where.
func (w *writer) paddedConst() (at int) {
	w.raw(opI32Const)
	at = len(w.b)
	w.b = append(w.b, make([]byte, paddedSlebLen)...)
	return at
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

// paddedSlebLen is the length of a signed LEB128 written in a fixed space:
// five bytes hold any int32.
const paddedSlebLen = 5

func putPaddedSleb(b []byte, v int32) {
	for i := range paddedSlebLen - 1 {
		b[i] = byte(v>>(7*i))&0x7f | 0x80
	}
	b[paddedSlebLen-1] = byte(v>>(7*(paddedSlebLen-1))) & 0x7f
}

// appendVec appends entries to the vector that is a section's body (empty
// when the module has no such section), counting them.
func appendVec(body []byte, entries ...[]byte) []byte {
	r := &reader{b: body}
	var n uint32
	if len(body) > 0 {
		n = r.u32()
	}
	out := binary.AppendUvarint(nil, uint64(n)+uint64(len(entries)))
	out = append(out, body[r.pos:]...)
	for _, e := range entries {
		out = append(out, e...)
	}
	return out
}
