package simcloud

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestValidNameAgreesWithBytewise: validName, which tests eight bytes at a
// time, agrees with the rule read byte by byte, for every byte value and
// for random names around each range's edges, of every length up to past
// the limit.
func TestValidNameAgreesWithBytewise(t *testing.T) {
	bytewise := func(s string) bool {
		if len(s) == 0 || len(s) > 128 {
			return false
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !alphanumeric(c) && (i == 0 || !strings.ContainsRune("-_.", rune(c))) {
				return false
			}
		}
		return true
	}
	check := func(s string) {
		t.Helper()
		if got, want := validName(s), bytewise(s); got != want {
			t.Fatalf("validName(%q) = %v, want %v", s, got, want)
		}
	}
	for c := range 256 {
		for _, s := range []string{string(rune(0)), "a", "abcdefg", "abcdefgh"} {
			check(s[:len(s)-1] + string([]byte{byte(c)}))
			check("x" + string([]byte{byte(c)}) + s)
		}
	}
	edges := []byte("\x00\x1f ,-./09:@AZ[^_`az{\x7f\x80\xff")
	rng := rand.New(rand.NewPCG(3, 5))
	for range 20000 {
		b := make([]byte, rng.IntN(131))
		for i := range b {
			if rng.IntN(8) == 0 {
				b[i] = edges[rng.IntN(len(edges))]
			} else {
				b[i] = "az09AZ-_."[rng.IntN(9)]
			}
		}
		check(string(b))
	}
}
