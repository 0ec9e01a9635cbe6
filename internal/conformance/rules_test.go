package conformance

import (
	"os"
	"strings"
	"testing"
)

// TestRulesTable: modules/README.md's rules table is Rules, row for row,
// so the docs list exactly what the suite checks, and where
// (TestRuleSites holds that to the code).
func TestRulesTable(t *testing.T) {
	const begin, end = "<!-- rules:begin -->\n", "<!-- rules:end -->"
	readme, err := os.ReadFile("../../modules/README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(readme), begin)
	table, _, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("modules/README.md has no %q ... %q block", begin, end)
	}
	if want := RulesTable(); table != want {
		t.Errorf("modules/README.md's rules table differs from Rules; replace it with:\n%s", want)
	}
}
