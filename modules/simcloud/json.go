package simcloud

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Request bodies are written by hand: they are few and small, and this
// keeps encoding out of reflection, which is slow under TinyGo. Responses
// are decoded by hand as well (jsondecode.go), except error bodies.

// jsonWriter appends JSON to a buffer. The caller writes the punctuation.
type jsonWriter struct{ b []byte }

func (w *jsonWriter) raw(s string) { w.b = append(w.b, s...) }

func (w *jsonWriter) int(n int64) { w.b = strconv.AppendInt(w.b, n, 10) }

// key writes `"name":`, preceded by a comma unless first.
func (w *jsonWriter) key(name string, first bool) {
	if !first {
		w.b = append(w.b, ',')
	}
	w.str(name)
	w.b = append(w.b, ':')
}

// str writes s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does.
func (w *jsonWriter) str(s string) {
	const hex = "0123456789abcdef"
	w.b = append(w.b, '"')
	for i := 0; i < len(s); {
		if n := plainPrefix(s, i); n > 0 {
			w.b = append(w.b, s[i:i+n]...)
			i += n
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				w.b = append(w.b, '\\', c)
			case c == '\n':
				w.b = append(w.b, '\\', 'n')
			case c == '\r':
				w.b = append(w.b, '\\', 'r')
			case c == '\t':
				w.b = append(w.b, '\\', 't')
			case c < 0x20:
				w.b = append(w.b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				w.b = append(w.b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			w.b = append(w.b, "\ufffd"...)
		} else {
			w.b = append(w.b, s[i:i+size]...)
		}
		i += size
	}
	w.b = append(w.b, '"')
}

func (w *jsonWriter) strings(list []string) {
	w.b = append(w.b, '[')
	for i, s := range list {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.str(s)
	}
	w.b = append(w.b, ']')
}

// stringMap writes m with sorted keys, so equal maps encode equally.
func (w *jsonWriter) stringMap(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.b = append(w.b, '{')
	for i, k := range keys {
		w.key(k, i == 0)
		w.str(m[k])
	}
	w.b = append(w.b, '}')
}

// word is the eight bytes of s from i on, as one integer, zeros past its
// end.
func word[T string | []byte](s T, i int) uint64 {
	var w [8]byte
	copy(w[:], s[i:])
	return binary.LittleEndian.Uint64(w[:])
}

// plainPrefix counts the bytes of s from i, up to eight, before the first
// that a JSON string cannot hold as it is: a control character, '"', '\\'
// or a byte of a non-ASCII character. It tests the eight as one integer
// because in a module every loop iteration also counts down the host's
// deadline budget.
func plainPrefix[T string | []byte](s T, i int) int {
	x := word(s, i) // past the end of s, zeros: control characters
	// Each test sets the high bit of the bytes it finds, exactly up to the
	// first one (a borrow only carries upwards): a byte below 0x20 borrows
	// into it, and a byte equal to c is a zero byte of x^(lowBits*c).
	quote, backslash := x^(lowBits*'"'), x^(lowBits*'\\')
	found := x&highBits | (x-lowBits*0x20)&^x&highBits | (quote-lowBits)&^quote&highBits | (backslash-lowBits)&^backslash&highBits
	return bits.TrailingZeros64(found) / 8
}
