package abi

import (
	"encoding/binary"
	"errors"
	"math"
)

// ErrMalformed is returned by Decoder when the bytes do not form a valid
// message: truncated input, an impossible length or trailing garbage. Both
// sides treat untrusted bytes with it, so a hostile peer can at worst make a
// call fail, never allocate unbounded memory.
var ErrMalformed = errors.New("abi: malformed message")

// Encoder appends the ABI's binary encoding to a byte slice.
//
// The format is deliberately tiny: unsigned LEB128 varints for lengths and
// unsigned numbers, zig-zag varints for signed ones, length-prefixed bytes
// for strings, and a count prefix for lists and maps. It needs no reflection,
// so it costs the same in TinyGo as in standard Go (see abi/README.md for the
// measurements that chose it over JSON).
type Encoder struct {
	buf []byte
}

// NewEncoder returns an Encoder that appends to buf[:0], reusing its storage.
func NewEncoder(buf []byte) *Encoder { return &Encoder{buf: buf[:0]} }

// Bytes returns the encoded message.
func (e *Encoder) Bytes() []byte { return e.buf }

// Reset empties the encoder but keeps its storage for the next message.
func (e *Encoder) Reset() { e.buf = e.buf[:0] }

// Uint appends an unsigned varint.
func (e *Encoder) Uint(v uint64) {
	if v < 0x80 {
		e.buf = append(e.buf, byte(v))
		return
	}
	e.buf = binary.AppendUvarint(e.buf, v)
}

// Int appends a zig-zag signed varint.
func (e *Encoder) Int(v int64) { e.buf = binary.AppendVarint(e.buf, v) }

// Bool appends one byte, 0 or 1.
func (e *Encoder) Bool(v bool) {
	if v {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

// String appends a length-prefixed string.
func (e *Encoder) String(s string) {
	e.Uint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

// ByteSlice appends a length-prefixed byte slice.
func (e *Encoder) ByteSlice(b []byte) {
	e.Uint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

// Strings appends a counted list of strings.
func (e *Encoder) Strings(list []string) {
	e.Uint(uint64(len(list)))
	for _, s := range list {
		e.String(s)
	}
}

// StringMap appends a counted list of key/value pairs. Order follows Go's
// map iteration: receivers must not depend on it.
func (e *Encoder) StringMap(m map[string]string) {
	e.Uint(uint64(len(m)))
	for k, v := range m {
		e.String(k)
		e.String(v)
	}
}

// Decoder reads what Encoder wrote. The first error sticks: later reads
// return zero values, and Err reports it, so decoding code stays linear.
type Decoder struct {
	buf []byte
	err error
	// shared, when set, is a copy of the whole input, of which String
	// returns slices instead of copying each string (UnmarshalShared).
	shared string
	// owned is set when the caller handed the input over
	// (UnmarshalOwning): ByteSlice returns slices of it.
	owned bool
}

// NewDecoder returns a Decoder over b. Decoded strings are copies, so b may
// be reused once decoding is done.
func NewDecoder(b []byte) *Decoder { return &Decoder{buf: b} }

// Err returns the first decoding error.
func (d *Decoder) Err() error { return d.err }

// Finish returns the first decoding error, or ErrMalformed when bytes remain:
// a message with trailing data was not produced by a conforming encoder.
func (d *Decoder) Finish() error {
	if d.err == nil && len(d.buf) != 0 {
		d.err = ErrMalformed
	}
	return d.err
}

func (d *Decoder) fail() { d.err = ErrMalformed; d.buf = nil }

// Uint reads an unsigned varint.
func (d *Decoder) Uint() uint64 {
	if d.err != nil {
		return 0
	}
	// Most varints (string lengths, counts) are one byte: read them without
	// binary.Uvarint's loop, which a guest pays per iteration.
	if len(d.buf) > 0 && d.buf[0] < 0x80 {
		v := uint64(d.buf[0])
		d.buf = d.buf[1:]
		return v
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// Int reads a zig-zag signed varint.
func (d *Decoder) Int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// Int32 reads a signed varint that must fit in 32 bits.
func (d *Decoder) Int32() int32 {
	v := d.Int()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail()
		return 0
	}
	return int32(v)
}

// Uint32 reads an unsigned varint that must fit in 32 bits.
func (d *Decoder) Uint32() uint32 {
	v := d.Uint()
	if v > math.MaxUint32 {
		d.fail()
		return 0
	}
	return uint32(v)
}

// Bool reads one byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.buf) == 0 || d.buf[0] > 1 {
		d.fail()
		return false
	}
	v := d.buf[0] == 1
	d.buf = d.buf[1:]
	return v
}

// Count reads a list or map length. Every element takes at least
// minElemSize bytes, so a count larger than the remaining input can only be
// a lie; rejecting it here bounds every allocation by the input size.
func (d *Decoder) Count(minElemSize int) int {
	n := d.Uint()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.buf)/minElemSize) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *Decoder) raw() []byte {
	n := d.Count(1)
	if d.err != nil {
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

// String reads a length-prefixed string.
func (d *Decoder) String() string {
	b := d.raw()
	if d.shared == "" || len(b) == 0 {
		return string(b)
	}
	// d.buf is what follows b in the input, and shared is all of it.
	end := len(d.shared) - len(d.buf)
	return d.shared[end-len(b) : end]
}

// ByteSlice reads a length-prefixed byte slice into a fresh copy, or a
// slice of the input when it was handed over (UnmarshalOwning); nil when
// empty.
func (d *Decoder) ByteSlice() []byte {
	b := d.raw()
	if len(b) == 0 {
		return nil
	}
	if d.owned {
		return b
	}
	return append([]byte(nil), b...)
}

// Strings reads a counted list of strings; nil when empty.
func (d *Decoder) Strings() []string {
	n := d.Count(1)
	if n == 0 {
		return nil
	}
	list := make([]string, n)
	for i := range list {
		list[i] = d.String()
	}
	return list
}

// StringMap reads a counted list of key/value pairs; nil when empty.
func (d *Decoder) StringMap() map[string]string {
	n := d.Count(2)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for i := 0; i < n; i++ {
		k := d.String()
		m[k] = d.String()
	}
	return m
}

// Message is implemented by every wire type: requests, results and the
// values inside them.
type Message interface {
	Encode(e *Encoder)
	Decode(d *Decoder)
}

// Marshal encodes m into buf[:0], reusing its storage.
func Marshal(buf []byte, m Message) []byte {
	e := Encoder{buf: buf[:0]}
	m.Encode(&e)
	return e.buf
}

// Unmarshal decodes b into m and rejects trailing bytes.
func Unmarshal(b []byte, m Message) error {
	d := Decoder{buf: b}
	m.Decode(&d)
	return d.Finish()
}

// UnmarshalShared is Unmarshal with every decoded string a slice of one
// copy of b instead of a copy of its own: one allocation per message
// rather than one per string, which for a load balancer call over every
// Node of a cluster is most of the decoding. Any string kept keeps the
// whole copy alive, so it suits a heap that frees nothing anyway (TinyGo's
// leaking collector); byte slices are still copied one by one.
func UnmarshalShared(b []byte, m Message) error {
	d := Decoder{buf: b, shared: string(b)}
	m.Decode(&d)
	return d.Finish()
}

// UnmarshalOwning is Unmarshal of an input the caller hands over: every
// decoded byte slice (an HTTP body) is a slice of b instead of a copy, so
// the message keeps b, which must not be changed or reused. Taking a
// large answer of the cloud from the host this way costs the guest one
// copy of it rather than two.
func UnmarshalOwning(b []byte, m Message) error {
	d := Decoder{buf: b, owned: true}
	m.Decode(&d)
	return d.Finish()
}

// list helpers: every slice of messages in the ABI is a counted sequence.

func encodeList[T any, P interface {
	*T
	Message
}](e *Encoder, list []T) {
	e.Uint(uint64(len(list)))
	for i := range list {
		P(&list[i]).Encode(e)
	}
}

func decodeList[T any, P interface {
	*T
	Message
}](d *Decoder) []T {
	return decodeListUpTo[T, P](d, math.MaxInt)
}

// decodeListUpTo is decodeList for a list the ABI bounds by count: a
// longer one is malformed, refused before anything is allocated for it.
func decodeListUpTo[T any, P interface {
	*T
	Message
}](d *Decoder, limit int) []T {
	n := d.Count(1)
	if n == 0 {
		return nil
	}
	if n > limit {
		d.fail()
		return nil
	}
	// Count assumed one byte per element; a struct of several fields takes
	// several, and many times more once decoded, so the count is checked
	// against the element's own least size before anything is allocated.
	// A short list is exempt: it allocates little whatever its count
	// claims, elements the input cannot back fail to decode all the same,
	// and the check costs an encoding, which every Node's Addresses paid.
	if n > shortList && n > len(d.buf)/minEncodedSize[T, P]() {
		d.fail()
		return nil
	}
	list := make([]T, n)
	for i := range list {
		P(&list[i]).Decode(d)
	}
	return list
}

// shortList is the longest list decodeListUpTo allocates without checking
// its count against the element's least encoded size.
const shortList = 16

// minEncodedSize is the fewest bytes an element of type T can take: its
// zero value's encoding, since every field encodes shortest when empty.
func minEncodedSize[T any, P interface {
	*T
	Message
}]() int {
	var zero T
	var e Encoder
	P(&zero).Encode(&e)
	return len(e.buf)
}
