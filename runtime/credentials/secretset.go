package credentials

import "time"

// SecretSet is a fixed set of secret values searched for as the host
// searches every answer a module gets: raw, hex, percent-encoded and
// base64, at every alignment. It lets a caller outside the host (the
// conformance suite, on what a module logs and answers) search with the
// same needles, so that what one finds the other finds.
type SecretSet struct{ set *needleSet }

// NewSecretSet returns the set of values. As the host does, it leaves
// out a value shorter than it searches for, unless a longer value holds it.
func NewSecretSet(values ...string) *SecretSet {
	k := newKnownSecrets()
	k.add(time.Time{}, values...)
	return &SecretSet{set: k.set.Load()}
}

// Redact returns s with every secret of the set, in any form searched
// for, overwritten in place, as the host overwrites an answer.
func (s *SecretSet) Redact(text string) string {
	if s == nil || s.set == nil {
		return text
	}
	return s.set.redactString(text)
}

// Holds reports whether text holds a secret of the set in any form
// searched for.
func (s *SecretSet) Holds(text string) bool {
	if s == nil || s.set == nil {
		return false
	}
	b := []byte(text)
	return overwrite(b, b, s.set.plain)
}
