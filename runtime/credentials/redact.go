package credentials

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
)

// A server that echoes its request (TRACE, a debugging endpoint, an error
// page quoting the headers), or keeps it and returns it later (an audit
// log), would hand a module the credentials the host added to it, or to
// another module's request. So every response is searched for every
// secret the process may send (known), raw and in the encodings a server
// might apply, and each occurrence is overwritten in place. Redacting
// rather than refusing keeps working the providers whose clouds quote a
// request's headers in their error pages; overwriting with as many bytes
// keeps Content-Length and offsets true.

// minReflectedLen is the shortest value searched for. A shorter one
// would match ordinary text (a password "pw" in every "pwd"), and
// redacting it would let a module guess it by echoing candidates. Such a
// value is still found inside the longer values sent with it: "Bearer
// <token>", "<user>:<password>".
const minReflectedLen = 8

// redactedByte replaces each byte of a secret found in a response.
const redactedByte = '*'

// needle is one form of a secret. Bits of the secret also reach before
// bytes before and after bytes after it (base64 at an offset that is not
// a multiple of three), which are overwritten with it.
type needle struct {
	text          []byte
	before, after int
}

// needleSet is the immutable set of every needle of a module, searched in
// each response; folded holds the same needles in ASCII lower case, for
// header names, which the HTTP client canonicalises.
type needleSet struct {
	plain, folded *needleIndex
}

// needleIndex finds needles of at least minReflectedLen bytes in one pass
// that reads the text four bytes at a time, at multiples of four: every
// occurrence covers one such group of four, at one of the needle's first
// four offsets, so the groups found at those offsets point at the
// candidates. A bitmap of the groups' hashes answers most groups of the
// text without the map: the cost does not grow with the number of needles.
type needleIndex struct {
	needles []needle
	at      map[uint32][]needleAt
	bitmap  [1 << needleHashBits / 64]uint64
}

type needleAt struct{ needle, offset int }

const needleHashBits = 16

func needleHash(group uint32) uint32 { return group * 0x9e3779b1 >> (32 - needleHashBits) }

func newNeedleIndex(needles []needle) *needleIndex {
	ix := &needleIndex{needles: needles, at: map[uint32][]needleAt{}}
	for i, n := range needles {
		for offset := range 4 {
			group := binary.LittleEndian.Uint32(n.text[offset:])
			ix.at[group] = append(ix.at[group], needleAt{i, offset})
			h := needleHash(group)
			ix.bitmap[h/64] |= 1 << (h % 64)
		}
	}
	return ix
}

// known holds every secret of the process that the host may send: the
// values of the credentials' secret keys, read as soon as a store is made
// and again at each rotation, the tokens obtained, and every value sent.
// It is one for the process, shared by every module and module
// generation: an origin that keeps what it received (an audit log, a
// "last request" API) may hand one module's secret to another, or to
// the next generation, or return a value rotated out long ago.
var known = newKnownSecrets()

const (
	// maxKnownBytes bounds the text searched for. Past it the oldest
	// values are forgotten, and the log says so: every rotation of a
	// Secret and every live token fit many times over.
	maxKnownBytes = 32 << 20
	// expiredTokenGrace is how long a token is still looked for after its
	// expiry, for a server whose clock runs late.
	expiredTokenGrace = time.Hour
)

// knownSecrets is the set of secrets searched for in every response.
type knownSecrets struct {
	mu       sync.Mutex
	values   map[string]*knownValue
	short    map[string]bool
	seq      uint64
	size     int
	maxBytes int
	now      func() time.Time
	set      atomic.Pointer[needleSet]
}

// knownValue is one secret and the forms it is searched in.
type knownValue struct {
	needles []needle
	size    int
	// expires is when a token stops being valid; zero for a value from
	// the Secret store, kept while the process lives.
	expires time.Time
	seq     uint64
}

func newKnownSecrets() *knownSecrets {
	return &knownSecrets{values: map[string]*knownValue{}, short: map[string]bool{}, maxBytes: maxKnownBytes, now: time.Now}
}

// add records values, sent together (a token and "Bearer <token>"), as
// secrets until expires, or for the life of the process when it is zero.
// A value already known keeps its first expiry, so that sending a token
// does not make it permanent. The needles are built only for a new value:
// a token refresh or a rotated Secret, not every request. It returns
// true the first time it is given a group of which no value is long
// enough to be looked for.
func (k *knownSecrets) add(expires time.Time, values ...string) (tooShort bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !slices.ContainsFunc(values, func(v string) bool { return len(v) >= minReflectedLen }) {
		group := strings.Join(values, "\x00")
		tooShort = !k.short[group]
		k.short[group] = true
		return tooShort
	}
	added := false
	for _, v := range values {
		if len(v) < minReflectedLen || k.values[v] != nil || slices.ContainsFunc(values, func(w string) bool {
			// Found by searching for w within it.
			return w != v && len(w) >= minReflectedLen && strings.Contains(v, w)
		}) {
			continue
		}
		kv := &knownValue{needles: encodings(v), expires: expires, seq: k.seq}
		for _, n := range kv.needles {
			kv.size += len(n.text)
		}
		k.seq++
		k.values[v] = kv
		k.size += kv.size
		added = true
	}
	if added {
		k.prune()
		k.rebuild()
	}
	return false
}

// prune forgets the tokens long expired, then the oldest values while
// the set is larger than its bound.
func (k *knownSecrets) prune() {
	now := k.now()
	for v, kv := range k.values {
		if !kv.expires.IsZero() && now.After(kv.expires.Add(expiredTokenGrace)) {
			k.forget(v)
		}
	}
	dropped := 0
	for k.size > k.maxBytes && len(k.values) > 1 {
		oldest := ""
		for v, kv := range k.values {
			if oldest == "" || kv.seq < k.values[oldest].seq {
				oldest = v
			}
		}
		k.forget(oldest)
		dropped++
	}
	if dropped > 0 {
		klog.InfoS("the host forgot its oldest secrets, over the bound of what it searches every response for: an origin that stored them may return them to a module",
			"forgotten", dropped, "boundBytes", k.maxBytes)
	}
}

func (k *knownSecrets) forget(v string) {
	k.size -= k.values[v].size
	delete(k.values, v)
}

// rebuild makes the index of every needle, searched from then on.
func (k *knownSecrets) rebuild() {
	var needles, folded []needle
	seen := map[string]bool{}
	for _, kv := range k.values {
		for _, n := range kv.needles {
			if !seen[string(n.text)] {
				seen[string(n.text)] = true
				needles = append(needles, n)
				folded = append(folded, needle{asciiLower(n.text), n.before, n.after})
			}
		}
	}
	k.set.Store(&needleSet{plain: newNeedleIndex(needles), folded: newNeedleIndex(folded)})
}

// encodings are the forms in which a server may return v, once each: raw,
// hex, percent-encoded, and base64 (standard and URL-safe, with and
// without padding, and inside a longer encoded text at each of the three
// alignments).
func encodings(v string) []needle {
	b := []byte(v)
	out := []needle{
		{text: b},
		{text: []byte(hex.EncodeToString(b))},
		{text: []byte(strings.ToUpper(hex.EncodeToString(b)))},
		{text: []byte(url.QueryEscape(v))},
		{text: []byte(url.PathEscape(v))},
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		out = append(out, needle{text: []byte(enc.EncodeToString(b))})
		raw := enc.WithPadding(base64.NoPadding)
		for offset := range 3 {
			// Characters wholly made of v's bits, with offset bytes of
			// other text before it; the partial ones around them are
			// overwritten too.
			bits := 8 * (offset + len(b))
			s := raw.EncodeToString(append(make([]byte, offset), b...))
			first, end := (8*offset+5)/6, bits/6
			n := needle{text: []byte(s[first:end])}
			if 8*offset%6 != 0 {
				n.before = 1
			}
			if bits%6 != 0 {
				n.after = 1
			}
			out = append(out, n)
		}
	}
	seen := map[string]bool{}
	return slices.DeleteFunc(out, func(n needle) bool {
		dup := seen[string(n.text)]
		seen[string(n.text)] = true
		return dup
	})
}

func asciiLower(b []byte) []byte {
	out := bytes.Clone(b)
	for i, c := range out {
		if 'A' <= c && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return out
}

// overwrite replaces in b every occurrence in text of the needles, text
// being b itself or its folded copy. All occurrences are found before any
// is overwritten, so that overlapping ones are all covered.
func overwrite(b, text []byte, ix *needleIndex) bool {
	type span struct{ from, to int }
	var spans []span
	for k := 0; k+4 <= len(text); k += 4 {
		group := binary.LittleEndian.Uint32(text[k:])
		if h := needleHash(group); ix.bitmap[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, c := range ix.at[group] {
			n, start := ix.needles[c.needle], k-c.offset
			if start >= 0 && bytes.HasPrefix(text[start:], n.text) {
				spans = append(spans, span{max(start-n.before, 0), min(start+len(n.text)+n.after, len(b))})
			}
		}
	}
	for _, sp := range spans {
		for i := sp.from; i < sp.to; i++ {
			b[i] = redactedByte
		}
	}
	return len(spans) > 0
}

func (s *needleSet) redactString(v string) string {
	b := []byte(v)
	if !overwrite(b, b, s.plain) {
		return v
	}
	return string(b)
}

func (s *needleSet) redactHeaderName(name string) string {
	b := []byte(name)
	if !overwrite(b, asciiLower(b), s.folded) {
		return name
	}
	return string(b)
}

// Redact overwrites in resp every secret the process knows, whichever
// module or generation sent it or will: in the body, the header names and
// values, and the error, which may quote a URL or a status line the server
// chose. A compressed body, which the search cannot read, is refused, for
// every module: the HTTP client negotiates gzip and decompresses by
// itself, so one comes back only when the module asked for it with
// Accept-Encoding.
func Redact(resp *abi.HTTPResponse) { known.redact(resp) }

func (k *knownSecrets) redact(resp *abi.HTTPResponse) {
	for _, h := range resp.Headers {
		if strings.EqualFold(h.Name, "Content-Encoding") && !strings.EqualFold(h.Value, "identity") {
			*resp = abi.HTTPResponse{Error: denied("the response is compressed (Content-Encoding), which hides it from the host's " +
				"search for the module's credentials: let the host negotiate compression, without Accept-Encoding").Error()}
			return
		}
	}
	set := k.set.Load()
	if set == nil {
		return
	}
	overwrite(resp.Body, resp.Body, set.plain)
	for i := range resp.Headers {
		h := &resp.Headers[i]
		h.Name, h.Value = set.redactHeaderName(h.Name), set.redactString(h.Value)
	}
	resp.Error = set.redactString(resp.Error)
}

// redactError returns err, or an error with the same message less the
// secrets known, when it holds one.
func (k *knownSecrets) redactError(err error) error {
	set := k.set.Load()
	if set == nil {
		return err
	}
	if msg := set.redactString(err.Error()); msg != err.Error() {
		return errors.New(msg)
	}
	return err
}
