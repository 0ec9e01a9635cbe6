package simcloud

import (
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The cloud's answers (instances, load balancers, routes) are decoded by
// hand too: encoding/json's reflection made decoding one instance take
// 64 µs under TinyGo and 253 µs under Go against 3 µs natively, most of an
// InstanceMetadata call. The decoder below reads the JSON once, in order,
// into the package's structs, and is meant to give exactly what
// json.Unmarshal gives for every input, errors included (an error for
// every input json.Unmarshal rejects, the same value for every other); the
// fuzz test FuzzDecodeAgreesWithEncodingJSON checks it. Its rules, those of
// encoding/json:
//   - object keys match field names exactly, else case-insensitively
//     (strings.EqualFold); unknown keys are skipped, duplicates decode
//     again into the same field;
//   - null leaves strings, numbers, booleans and struct elements as they
//     are and sets slices, maps and pointers to nil;
//   - arrays decode into the slice's existing elements, then grow it; an
//     empty array is an empty, non-nil slice;
//   - a value of the wrong type is skipped, decoding goes on, and the first
//     such mismatch is the error;
//   - invalid UTF-8 and unpaired surrogates in strings become U+FFFD.

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// decoder reads one JSON document. A syntax error stops it; a type
// mismatch is remembered in mismatch and decoding continues.
type decoder struct {
	data     []byte
	pos      int
	depth    int
	mismatch error
	// recent are strings decoded before, by a hash of their bytes: the
	// values a listing repeats for every object (zones, types, states,
	// label keys) then cost one allocation per document rather than one
	// per object, which a module without a collector keeps until its
	// instance is recycled.
	recent [64]string
}

// maxRecentBytes bounds the strings kept in decoder.recent: a repeated
// value is short, a long one is rarely repeated.
const maxRecentBytes = 32

// text returns b as a string, the one decoded before when it is recent.
// It looks at b eight bytes at a time, with no loop over its bytes: in a
// module, every turn of a loop also counts down the host's deadline
// budget.
func (d *decoder) text(b []byte) string {
	if len(b) > maxRecentBytes {
		return string(b)
	}
	h := (word(b, 0)*0x9E3779B97F4A7C15 ^ word(b, max(0, len(b)-8)) ^ uint64(len(b))) * 0xFF51AFD7ED558CCD
	// Two ways of one set, the one used last first: the values an object
	// repeats stay while the ones it does not (IDs, names) pass through.
	set := d.recent[(h>>59)*2:][:2] // the top 5 bits: 32 sets
	switch {
	case sameText(b, set[0]):
	case sameText(b, set[1]):
		set[0], set[1] = set[1], set[0]
	default:
		set[0], set[1] = string(b), set[0]
	}
	return set[0]
}

// sameText is string(b) == s, eight bytes at a time, spelled out so that
// no toolchain allocates the conversion.
func sameText(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i += 8 {
		if word(b, i) != word(s, i) {
			return false
		}
	}
	return true
}

// decodeJSON decodes data with value, which reads one JSON value.
func decodeJSON(data []byte, value func(*decoder) error) error {
	d := &decoder{data: data}
	if err := value(d); err != nil {
		return err
	}
	if d.skipSpace(); d.pos != len(d.data) {
		return d.syntaxError("data after the top-level value")
	}
	return d.mismatch
}

func (d *decoder) syntaxError(what string) error {
	return errors.New("invalid JSON at offset " + strconv.Itoa(d.pos) + ": " + what)
}

// wrongType records a value of the wrong JSON type for a field and skips it.
func (d *decoder) wrongType(want string) error {
	if d.mismatch == nil {
		d.mismatch = errors.New("JSON value at offset " + strconv.Itoa(d.pos) + " is not " + want)
	}
	return d.skip()
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// next returns the first byte of the next value, or 0 at the end.
func (d *decoder) next() byte {
	d.skipSpace()
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

// null consumes a null literal if one comes next.
func (d *decoder) null() (bool, error) {
	if d.next() != 'n' {
		return false, nil
	}
	return true, d.literal("null")
}

func (d *decoder) literal(word string) error {
	if !strings.HasPrefix(string(d.data[d.pos:min(len(d.data), d.pos+len(word))]), word) {
		return d.syntaxError("invalid literal")
	}
	d.pos += len(word)
	return nil
}

// skip consumes any value, validating it.
func (d *decoder) skip() error {
	switch c := d.next(); {
	case c == '{':
		more, err := d.enter('}')
		for more && err == nil {
			if _, err = d.key(); err == nil {
				err = d.skip()
			}
			if err == nil {
				more, err = d.more('}')
			}
		}
		return err
	case c == '[':
		more, err := d.enter(']')
		for more && err == nil {
			err = d.skip()
			if err == nil {
				more, err = d.more(']')
			}
		}
		return err
	case c == '"':
		return d.skipString()
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		_, err := d.number()
		return err
	}
	return d.syntaxError("expected a value")
}

// Objects and arrays are read in loops over enter, key and more rather
// than with a callback per member: a callback's captured variables are an
// allocation per object under TinyGo, which a module without a collector
// keeps until its instance is recycled, and a listing has thousands of
// objects. The loops read:
//
//	more, err := d.enter('}')
//	for more && err == nil {
//		key, err = d.key() ... then the member's value
//		if err == nil {
//			more, err = d.more('}')
//		}
//	}

// enter consumes the opening bracket of the object or array the decoder is
// at and reports whether a member or element follows; closing is '}' or ']'.
func (d *decoder) enter(closing byte) (bool, error) {
	if d.depth++; d.depth > maxJSONDepth {
		return false, d.syntaxError("nested too deeply")
	}
	d.pos++ // { or [
	if d.next() == closing {
		d.pos++
		d.depth--
		return false, nil
	}
	return true, nil
}

// more consumes what follows a member or element: a comma, reporting that
// another follows, or the closing bracket.
func (d *decoder) more(closing byte) (bool, error) {
	switch d.next() {
	case ',':
		d.pos++
		return true, nil
	case closing:
		d.pos++
		d.depth--
		return false, nil
	}
	return false, d.syntaxError("expected ',' or '" + string(rune(closing)) + "'")
}

// key reads a member's key and the colon after it, leaving the decoder at
// the member's value.
func (d *decoder) key() (string, error) {
	if d.next() != '"' {
		return "", d.syntaxError("expected a key")
	}
	key, err := d.string()
	if err != nil {
		return "", err
	}
	if d.next() != ':' {
		return "", d.syntaxError("expected ':'")
	}
	d.pos++
	return key, nil
}

// number consumes a number, returning its text.
func (d *decoder) number() (string, error) {
	start := d.pos
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && '0' <= d.data[d.pos] && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(d.data) && d.data[d.pos] == '0':
		d.pos++
	case digits() == 0:
		return "", d.syntaxError("invalid number")
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if digits() == 0 {
			return "", d.syntaxError("invalid number")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return "", d.syntaxError("invalid number")
		}
	}
	return string(d.data[start:d.pos]), nil
}

// string consumes a string, returning its value.
func (d *decoder) string() (string, error) {
	d.pos++ // "
	start := d.pos
	// Fast path: no escapes, all ASCII.
	for d.pos < len(d.data) {
		if n := plainPrefix(d.data, d.pos); n > 0 {
			d.pos += n
			continue
		}
		if d.data[d.pos] == '"' {
			d.pos++
			return d.text(d.data[start : d.pos-1]), nil
		}
		break // an escape, a control character or non-ASCII
	}
	b := append([]byte(nil), d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(b), nil
		case c < ' ':
			return "", d.syntaxError("control character in string")
		case c == '\\':
			r, err := d.escape()
			if err != nil {
				return "", err
			}
			b = utf8.AppendRune(b, r)
		case c < utf8.RuneSelf:
			b = append(b, c)
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			b = utf8.AppendRune(b, r) // RuneError for invalid UTF-8
			d.pos += size
		}
	}
	return "", d.syntaxError("unterminated string")
}

// skipString consumes a string as string does, without building its value:
// a skipped value costs no allocation.
func (d *decoder) skipString() error {
	d.pos++ // "
	for d.pos < len(d.data) {
		if n := plainPrefix(d.data, d.pos); n > 0 {
			d.pos += n
			continue
		}
		switch c := d.data[d.pos]; {
		case c == '"':
			d.pos++
			return nil
		case c < ' ':
			return d.syntaxError("control character in string")
		case c == '\\':
			if _, err := d.escape(); err != nil {
				return err
			}
		default:
			d.pos++ // invalid UTF-8 is replaced, not refused
		}
	}
	return d.syntaxError("unterminated string")
}

// escape consumes one escape sequence (two of them for a surrogate pair).
func (d *decoder) escape() (rune, error) {
	if d.pos+1 >= len(d.data) {
		return 0, d.syntaxError("unterminated string")
	}
	c := d.data[d.pos+1]
	d.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, ok := d.hex4(d.pos)
		if !ok {
			return 0, d.syntaxError("invalid \\u escape")
		}
		d.pos += 4
		if !utf16.IsSurrogate(r) {
			return r, nil
		}
		if d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
			if r2, ok := d.hex4(d.pos + 2); ok {
				if pair := utf16.DecodeRune(r, r2); pair != unicode.ReplacementChar {
					d.pos += 6
					return pair, nil
				}
			}
		}
		return unicode.ReplacementChar, nil
	}
	return 0, d.syntaxError("invalid escape")
}

func (d *decoder) hex4(at int) (rune, bool) {
	if at+4 > len(d.data) {
		return 0, false
	}
	var r rune
	for _, c := range d.data[at : at+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// Field decoders: each consumes one value into dst.

func (d *decoder) stringInto(dst *string) error {
	switch d.next() {
	case 'n':
		return d.literal("null")
	case '"':
		s, err := d.string()
		*dst = s
		return err
	}
	return d.wrongType("a string")
}

func (d *decoder) int32Into(dst *int32) error {
	switch c := d.next(); {
	case c == 'n':
		return d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		text, err := d.number()
		if err != nil {
			return err
		}
		n, perr := strconv.ParseInt(text, 10, 32)
		if perr != nil {
			if d.mismatch == nil {
				d.mismatch = errors.New("JSON number " + text + " is not a 32-bit integer")
			}
			return nil
		}
		*dst = int32(n)
		return nil
	}
	return d.wrongType("a number")
}

func (d *decoder) boolInto(dst *bool) error {
	switch d.next() {
	case 'n':
		return d.literal("null")
	case 't':
		*dst = true
		return d.literal("true")
	case 'f':
		*dst = false
		return d.literal("false")
	}
	return d.wrongType("a boolean")
}

// sliceInto decodes an array into *dst with elem, reusing its elements as
// encoding/json does.
func sliceInto[T any](d *decoder, dst *[]T, elem func(*decoder, *T) error) error {
	if null, err := d.null(); null || err != nil {
		if null {
			*dst = nil
		}
		return err
	}
	if d.next() != '[' {
		return d.wrongType("an array")
	}
	s := *dst
	i := 0
	more, err := d.enter(']')
	for more && err == nil {
		if i >= len(s) {
			if i < cap(s) {
				s = s[:i+1]
			} else {
				var zero T
				s = append(s, zero)
			}
		}
		i++
		err = elem(d, &s[i-1])
		if err == nil {
			more, err = d.more(']')
		}
	}
	if i == 0 {
		s = []T{}
	}
	*dst = s[:i]
	return err
}

func (d *decoder) stringsInto(dst *[]string) error {
	return sliceInto(d, dst, (*decoder).stringInto)
}

func (d *decoder) stringMapInto(dst *map[string]string) error {
	if null, err := d.null(); null || err != nil {
		if null {
			*dst = nil
		}
		return err
	}
	if d.next() != '{' {
		return d.wrongType("an object")
	}
	if *dst == nil {
		*dst = map[string]string{}
	}
	more, err := d.enter('}')
	for more && err == nil {
		var key, v string
		if key, err = d.key(); err == nil {
			err = d.stringInto(&v)
			(*dst)[key] = v
		}
		if err == nil {
			more, err = d.more('}')
		}
	}
	return err
}

// structInto decodes an object with field, which decodes the value of the
// field named by a key and reports whether there is one. Keys are matched
// as encoding/json matches them: exactly, else ignoring case.
func (d *decoder) structInto(names []string, field func(d *decoder, i int) error) error {
	if null, err := d.null(); null || err != nil {
		return err
	}
	if d.next() != '{' {
		return d.wrongType("an object")
	}
	more, err := d.enter('}')
	for more && err == nil {
		var key string
		if key, err = d.key(); err != nil {
			break
		}
		if i := fieldIndex(names, key); i < 0 {
			err = d.skip()
		} else {
			err = field(d, i)
		}
		if err == nil {
			more, err = d.more('}')
		}
	}
	return err
}

func fieldIndex(names []string, key string) int {
	for i, name := range names {
		if name == key {
			return i
		}
	}
	for i, name := range names {
		if strings.EqualFold(name, key) {
			return i
		}
	}
	return -1
}

// The package's types.

var instanceFields = []string{"id", "name", "zone", "region", "type", "state", "addresses", "labels"}

func (d *decoder) instanceInto(in *instance) error {
	return d.structInto(instanceFields, func(d *decoder, i int) error {
		switch i {
		case 0:
			return d.stringInto(&in.ID)
		case 1:
			return d.stringInto(&in.Name)
		case 2:
			return d.stringInto(&in.Zone)
		case 3:
			return d.stringInto(&in.Region)
		case 4:
			return d.stringInto(&in.Type)
		case 5:
			return d.stringInto(&in.State)
		case 6:
			return sliceInto(d, &in.Addresses, (*decoder).addressInto)
		default:
			return d.stringMapInto(&in.Labels)
		}
	})
}

var addressFields = []string{"type", "address"}

func (d *decoder) addressInto(a *address) error {
	return d.stringPairInto(addressFields, &a.Type, &a.Address)
}

// stringPairInto decodes an object of two string fields, named by fields,
// into first and second.
func (d *decoder) stringPairInto(fields []string, first, second *string) error {
	return d.structInto(fields, func(d *decoder, i int) error {
		if i == 0 {
			return d.stringInto(first)
		}
		return d.stringInto(second)
	})
}

var loadBalancerFields = []string{"name", "ip", "ports", "targets", "healthCheck", "sourceRanges", "tags"}

func (d *decoder) loadBalancerInto(lb *loadBalancer) error {
	return d.structInto(loadBalancerFields, func(d *decoder, i int) error {
		switch i {
		case 0:
			return d.stringInto(&lb.Name)
		case 1:
			return d.stringInto(&lb.IP)
		case 2:
			return sliceInto(d, &lb.Ports, (*decoder).lbPortInto)
		case 3:
			return d.stringsInto(&lb.Targets)
		case 4:
			return d.healthCheckInto(&lb.HealthCheck)
		case 5:
			return d.stringsInto(&lb.SourceRanges)
		default:
			return d.stringMapInto(&lb.Tags)
		}
	})
}

var lbAddressFields = []string{"name", "ip"}

func (d *decoder) lbAddressInto(a *lbAddress) error {
	return d.stringPairInto(lbAddressFields, &a.Name, &a.IP)
}

var lbPortFields = []string{"name", "protocol", "port", "nodePort"}

func (d *decoder) lbPortInto(p *lbPort) error {
	return d.structInto(lbPortFields, func(d *decoder, i int) error {
		switch i {
		case 0:
			return d.stringInto(&p.Name)
		case 1:
			return d.stringInto(&p.Protocol)
		case 2:
			return d.int32Into(&p.Port)
		default:
			return d.int32Into(&p.NodePort)
		}
	})
}

var healthCheckFields = []string{"nodePort", "path"}

func (d *decoder) healthCheckInto(dst **healthCheck) error {
	if null, err := d.null(); null || err != nil {
		if null {
			*dst = nil
		}
		return err
	}
	if *dst == nil {
		*dst = new(healthCheck)
	}
	hc := *dst
	return d.structInto(healthCheckFields, func(d *decoder, i int) error {
		if i == 0 {
			return d.int32Into(&hc.NodePort)
		}
		return d.stringInto(&hc.Path)
	})
}

var errorBodyFields = []string{"error"}

func (d *decoder) errorBodyInto(e *errorBody) error {
	return d.structInto(errorBodyFields, func(d *decoder, _ int) error {
		if null, err := d.null(); null || err != nil {
			if null {
				e.Error = nil
			}
			return err
		}
		if d.next() != '"' {
			return d.wrongType("a string")
		}
		s, err := d.string()
		e.Error = &s
		return err
	})
}

var routeFields = []string{"name", "destinationCIDR", "targetInstance", "targetName", "blackhole"}

func (d *decoder) routeInto(r *route) error {
	return d.structInto(routeFields, func(d *decoder, i int) error {
		switch i {
		case 0:
			return d.stringInto(&r.Name)
		case 1:
			return d.stringInto(&r.DestinationCIDR)
		case 2:
			return d.stringInto(&r.TargetInstance)
		case 3:
			return d.stringInto(&r.TargetName)
		default:
			return d.boolInto(&r.Blackhole)
		}
	})
}

// UnmarshalJSON implementations, which the SDK's rest client prefers to
// encoding/json.

func (in *instance) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, func(d *decoder) error { return d.instanceInto(in) })
}

func (lb *loadBalancer) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, func(d *decoder) error { return d.loadBalancerInto(lb) })
}

func (a *lbAddress) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, func(d *decoder) error { return d.lbAddressInto(a) })
}

func (e *errorBody) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, func(d *decoder) error { return d.errorBodyInto(e) })
}

func (r *route) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, func(d *decoder) error { return d.routeInto(r) })
}

// instanceList, loadBalancerList and routeList are the answers of the
// list endpoints.
type (
	instanceList     []instance
	loadBalancerList []loadBalancer
	routeList        []route
)

func (l *loadBalancerList) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, func(d *decoder) error {
		return sliceInto(d, (*[]loadBalancer)(l), (*decoder).loadBalancerInto)
	})
}

func (l *instanceList) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, func(d *decoder) error { return sliceInto(d, (*[]instance)(l), (*decoder).instanceInto) })
}

// instanceStream decodes a listing of instances as instanceList does, but
// one instance at a time, handing each to each; listed is set when the
// listing was an array rather than null.
type instanceStream struct {
	each   func(*instance) error
	listed bool
}

// UnmarshalJSON decodes the array element by element into one instance,
// handing it to each before the next is decoded, so that a listing of
// thousands never exists decoded whole. Another type than an array or
// null is a mismatch, as for instanceList.
func (s *instanceStream) UnmarshalJSON(data []byte) error {
	var in instance
	return decodeJSON(data, func(d *decoder) error {
		if null, err := d.null(); null || err != nil {
			return err
		}
		if d.next() != '[' {
			return d.wrongType("an array")
		}
		s.listed = true
		more, err := d.enter(']')
		for more && err == nil {
			resetInstance(&in)
			if err = d.instanceInto(&in); err == nil {
				err = s.each(&in)
			}
			if err == nil {
				more, err = d.more(']')
			}
		}
		return err
	})
}

// resetInstance empties in for the next instance of a stream, keeping the
// storage of its addresses and labels: an absent field then reads as
// empty rather than nil, which nothing tells apart.
func resetInstance(in *instance) {
	addresses, labels := in.Addresses[:0], in.Labels
	clear(addresses[:cap(addresses)])
	clear(labels)
	*in = instance{Addresses: addresses, Labels: labels}
}

func (l *routeList) UnmarshalJSON(data []byte) error {
	return decodeJSON(data, func(d *decoder) error { return sliceInto(d, (*[]route)(l), (*decoder).routeInto) })
}
