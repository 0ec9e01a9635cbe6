package conformance

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRulesTable: the docs' rules table is Rules, row for row, so the docs
// list exactly what the suite checks; and every Rule constant is in Rules
// and either has a judge there or is used by the suite's code, so no
// documented rule goes unchecked.
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

	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{} // constant name -> value
	used := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if strings.HasPrefix(id.Name, "Rule") && i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok {
							declared[id.Name] = strings.Trim(lit.Value, `"`)
						}
					}
				}
			case *ast.Ident:
				if name != "rules.go" && strings.HasPrefix(n.Name, "Rule") {
					used[n.Name] = true
				}
			}
			return true
		})
	}
	inRules, judged := map[string]bool{}, map[string]bool{}
	for _, r := range Rules {
		inRules[r.Name] = true
		judged[r.Name] = r.judge != nil
	}
	for constant, value := range declared {
		if !inRules[value] {
			t.Errorf("rule %s (%s) is not in Rules, so the docs do not list it", value, constant)
		}
		if !used[constant] && !judged[value] {
			t.Errorf("rule %s (%s) is in the docs but no check of the suite uses it", value, constant)
		}
	}
	if len(declared) != len(Rules) {
		t.Errorf("%d Rule constants, %d rows in Rules", len(declared), len(Rules))
	}
}
