package simcloud

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortedUniqueAgreesWithSortCompact: sortedUnique gives what
// slices.Sort and slices.Compact give, for IDs sharing long prefixes,
// shorter than eight bytes, holding zero bytes and repeated.
func TestSortedUniqueAgreesWithSortCompact(t *testing.T) {
	alphabet := []string{"", "\x00", "a", "i-", "i-0001", "i-00010", "longer-than-eight-", "\xff", "Z"}
	rng := rand.New(rand.NewPCG(7, 11))
	for range 2000 {
		ids := make([]string, rng.IntN(40))
		for i := range ids {
			ids[i] = alphabet[rng.IntN(len(alphabet))] + alphabet[rng.IntN(len(alphabet))] + alphabet[rng.IntN(len(alphabet))]
		}
		want := slices.Compact(slices.Sorted(slices.Values(ids)))
		if got := sortedUnique(slices.Clone(ids)); !slices.Equal(got, want) {
			t.Fatalf("sortedUnique(%q) = %q, want %q", ids, got, want)
		}
	}
}
