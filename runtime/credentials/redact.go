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

	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
)

// A server that echoes its request (TRACE, a debugging endpoint, an error
// page quoting the headers) would hand the module the credentials the
// host added to it. So every response is searched for what the host sent
// on the module's behalf, raw and in the encodings a server might apply,
// and each occurrence is overwritten in place. Redacting rather than
// refusing keeps working the providers whose clouds quote a request's
// headers in their error pages; overwriting with as many bytes keeps
// Content-Length and offsets true.

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

// secretSlot is one place a credential puts secrets: what it sends with
// each request, or the client secret it sends to its token endpoint.
type secretSlot struct{ credential, part string }

// sentSecrets records the secrets a module's credentials sent, one entry
// per slot, keeping the values before the current ones too: a request
// sent before a token refresh may come back after it.
type sentSecrets struct {
	module string
	mu     sync.Mutex
	slots  map[secretSlot]*sentSlot
	set    atomic.Pointer[needleSet]
}

type sentSlot struct {
	values            []string
	needles, previous []needle
}

func newSentSecrets(module string) *sentSecrets {
	return &sentSecrets{module: module, slots: map[secretSlot]*sentSlot{}}
}

// record notes that slot sent values, before the request leaves. The
// needles are built only when the values change: a token refresh or a
// rotated Secret, not every request.
func (s *sentSecrets) record(slot secretSlot, values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.slots[slot]
	if last != nil && slices.Equal(last.values, values) {
		return
	}
	next := &sentSlot{values: slices.Clone(values), needles: needlesOf(values)}
	if last != nil {
		next.previous = last.needles
	}
	if len(next.needles) == 0 {
		klog.InfoS("a credential's secret is too short for the host to recognise in responses, where a module may read it back",
			"module", s.module, "credential", slot.credential, "part", slot.part, "minimumBytes", minReflectedLen)
	}
	s.slots[slot] = next
	var needles, folded []needle
	seen := map[string]bool{}
	for _, sl := range s.slots {
		for _, n := range slices.Concat(sl.needles, sl.previous) {
			if !seen[string(n.text)] {
				seen[string(n.text)] = true
				needles = append(needles, n)
				folded = append(folded, needle{asciiLower(n.text), n.before, n.after})
			}
		}
	}
	s.set.Store(&needleSet{plain: newNeedleIndex(needles), folded: newNeedleIndex(folded)})
}

// needlesOf returns the forms of each value long enough to search for and
// not already found by searching for another value within it.
func needlesOf(values []string) []needle {
	var out []needle
	seen := map[string]bool{}
	for _, v := range values {
		if len(v) < minReflectedLen || slices.ContainsFunc(values, func(w string) bool {
			return w != v && len(w) >= minReflectedLen && strings.Contains(v, w)
		}) {
			continue
		}
		for _, n := range encodings(v) {
			if !seen[string(n.text)] {
				seen[string(n.text)] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// encodings are the forms in which a server may return v: raw, hex,
// percent-encoded, and base64 (standard and URL-safe, with and without
// padding, and inside a longer encoded text at each of the three
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
	return out
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

// redact overwrites in resp every secret the module's credentials sent:
// in the body, the header names and values, and the error, which may
// quote a URL or a status line the server chose. A compressed body, which
// the search cannot read, is refused: the HTTP client negotiates gzip and
// decompresses by itself, so one comes back only when the module asked for
// it with Accept-Encoding.
func (s *sentSecrets) redact(resp *abi.HTTPResponse) {
	for _, h := range resp.Headers {
		if strings.EqualFold(h.Name, "Content-Encoding") && !strings.EqualFold(h.Value, "identity") {
			*resp = abi.HTTPResponse{Error: denied("the response is compressed (Content-Encoding), which hides it from the host's " +
				"search for the module's credentials: let the host negotiate compression, without Accept-Encoding").Error()}
			return
		}
	}
	set := s.set.Load()
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
// secrets sent, when it holds one.
func (s *sentSecrets) redactError(err error) error {
	set := s.set.Load()
	if set == nil {
		return err
	}
	if msg := set.redactString(err.Error()); msg != err.Error() {
		return errors.New(msg)
	}
	return err
}
