package conformance

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite "+ruleSitesFile+" from the code")

const ruleSitesFile = "rulesites.go"

// A ruleSite is where the suite checks one rule, read from its code: the
// judge of its entry in Rules, and the functions that report it through a
// call other than skip (check, fail, pass, judged, or a closure of theirs
// such as healthy), directly or through a local name for it.
type ruleSite struct {
	constant, judge string
	reporters       []string
}

func (s ruleSite) String() string {
	var where []string
	if s.judge != "" {
		where = append(where, s.judge)
	}
	return strings.Join(append(where, s.reporters...), "; ")
}

// readRuleSites reads, from the package's files by name, every rule's
// site, in the order of Rules, and the problems that leave a rule
// unchecked or undocumented.
func readRuleSites(files map[string]*ast.File) (sites []ruleSite, problems []string) {
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range files {
			if !yield(name) {
				return
			}
		}
	})
	constants := map[string]string{} // constant -> rule
	funcFile := map[string]string{}  // function -> file
	var entries *ast.CompositeLit
	rulesFile := ""
	for _, name := range names {
		for _, decl := range files[name].Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				funcFile[d.Name.Name] = name
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, id := range vs.Names {
						if i >= len(vs.Values) {
							continue
						}
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && d.Tok == token.CONST && strings.HasPrefix(id.Name, "Rule") {
							constants[id.Name], _ = strconv.Unquote(lit.Value)
						}
						if cl, ok := vs.Values[i].(*ast.CompositeLit); ok && id.Name == "Rules" {
							entries, rulesFile = cl, name
						}
					}
				}
			}
		}
	}
	if entries == nil {
		return nil, []string{"no Rules table"}
	}

	// Who reports each rule constant, outside the Rules table's file.
	reporters := map[string][]string{}
	for _, name := range names {
		if name == rulesFile {
			continue
		}
		for _, decl := range files[name].Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			where := "`" + funcName(fn) + "` (" + name + ")"
			local := map[string]string{} // a local name -> the constant it stands for
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec:
					for i, id := range n.Names {
						if i < len(n.Values) {
							if c, ok := n.Values[i].(*ast.Ident); ok && constants[c.Name] != "" {
								local[id.Name] = c.Name
							}
						}
					}
				case *ast.AssignStmt:
					if n.Tok == token.DEFINE && len(n.Lhs) == len(n.Rhs) {
						for i, lhs := range n.Lhs {
							c, ok1 := n.Rhs[i].(*ast.Ident)
							id, ok2 := lhs.(*ast.Ident)
							if ok1 && ok2 && constants[c.Name] != "" {
								local[id.Name] = c.Name
							}
						}
					}
				case *ast.CallExpr:
					if callee(n) == "skip" {
						return true
					}
					for _, arg := range n.Args {
						id, ok := arg.(*ast.Ident)
						if !ok {
							continue
						}
						c := id.Name
						if l, ok := local[c]; ok {
							c = l
						}
						if constants[c] != "" && !slices.Contains(reporters[c], where) {
							reporters[c] = append(reporters[c], where)
						}
					}
				}
				return true
			})
		}
	}

	listed := map[string]bool{}
	for _, elt := range entries.Elts {
		cl, ok := elt.(*ast.CompositeLit)
		if !ok {
			continue
		}
		var site ruleSite
		for _, field := range cl.Elts {
			kv, ok := field.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			switch key := types.ExprString(kv.Key); key {
			case "Name":
				site.constant = types.ExprString(kv.Value)
			case "judge":
				var in []string
				ast.Inspect(kv.Value, func(n ast.Node) bool {
					if id, ok := n.(*ast.Ident); ok && funcFile[id.Name] != "" && !slices.Contains(in, funcFile[id.Name]) {
						in = append(in, funcFile[id.Name])
					}
					return true
				})
				site.judge = "judge `" + types.ExprString(kv.Value) + "` (" + strings.Join(in, ", ") + ") on every faulted call"
			}
		}
		if constants[site.constant] == "" {
			problems = append(problems, fmt.Sprintf("the entry of Rules named %s is not a Rule constant", site.constant))
			continue
		}
		listed[site.constant] = true
		site.reporters = reporters[site.constant]
		if site.judge == "" && len(site.reporters) == 0 {
			problems = append(problems, fmt.Sprintf("rule %s (%s) has no judge, and no code reports it but to skip it", constants[site.constant], site.constant))
		}
		sites = append(sites, site)
	}
	for _, c := range slices.Sorted(func(yield func(string) bool) {
		for c := range constants {
			if !yield(c) {
				return
			}
		}
	}) {
		if !listed[c] {
			problems = append(problems, fmt.Sprintf("rule %s (%s) has no entry in Rules, so the docs do not list it", constants[c], c))
		}
	}
	return sites, problems
}

// funcName is a function's name as the docs show it: runner.check for a
// method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	recv := fn.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	return types.ExprString(recv) + "." + fn.Name.Name
}

// callee is the name a call calls: skip for r.skip(...).
func callee(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// ruleSitesSource is rulesites.go as the code makes it.
func ruleSitesSource(sites []ruleSite) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by go test -run TestRuleSites -update; DO NOT EDIT.\n\npackage conformance\n\n" +
		"// ruleSites says where the suite checks each rule, for the docs' table:\n" +
		"// its judge, and the functions that report it (rulesites_test.go reads\n" +
		"// them from the code).\n" +
		"var ruleSites = map[string]string{\n")
	for _, s := range sites {
		fmt.Fprintf(&b, "\t%s: %q,\n", s.constant, s.String())
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

// TestRuleSites: every Rule constant has its entry in Rules, every entry
// is a rule that a judge or a sequence of the suite checks, and the docs'
// "checked by" column (rulesites.go) is what the code says. Run it with
// -update to rewrite rulesites.go, then go run ./hack/docgen.
func TestRuleSites(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") || path == ruleSitesFile {
			continue
		}
		if files[path], err = parser.ParseFile(fset, path, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	sites, problems := readRuleSites(files)
	for _, p := range problems {
		t.Error(p)
	}
	want, err := ruleSitesSource(sites)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(ruleSitesFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got, _ := os.ReadFile(ruleSitesFile); !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go test ./internal/conformance -run TestRuleSites -update, then go run ./hack/docgen", ruleSitesFile)
	}
}

// TestReadRuleSites: the reading finds a rule's judge and the sequences
// that report it, through a local name too, and names each rule declared
// without an entry, each entry that is no rule, and each rule nothing
// checks.
func TestReadRuleSites(t *testing.T) {
	const judges = `package conformance
func underFault(j judgeFunc) judgeFunc { return j }
func goneWithoutWord(c *callCase) evidence { return nil }
`
	tests := []struct {
		name       string
		rules, seq string
		sites      []string
		problems   []string
	}{
		{
			name:  "checked by a sequence",
			rules: `const RuleA = "a"; var Rules = []Rule{{Name: RuleA, Checks: "x"}}`,
			seq:   `func (r *runner) seq() { r.check(RuleA, "n", "", nil) }`,
			sites: []string{"`runner.seq` (seq.go)"},
		},
		{
			name:  "through a local name and a closure",
			rules: `const RuleA = "a"; var Rules = []Rule{{Name: RuleA}}`,
			seq: `func (r *runner) seq() {
	const rule = RuleA
	step := func(name string) bool { return r.check(rule, name, "", nil) }
	again := RuleA
	healthy(again)
	step("n")
}`,
			sites: []string{"`runner.seq` (seq.go)"},
		},
		{
			name:  "judged",
			rules: `const RuleA = "a"; var Rules = []Rule{{Name: RuleA, judge: underFault(goneWithoutWord)}}`,
			seq:   `func (r *runner) seq() { r.judged(RuleA, "n", nil) }`,
			sites: []string{"judge `underFault(goneWithoutWord)` (judges.go) on every faulted call; `runner.seq` (seq.go)"},
		},
		{
			name:     "only skipped",
			rules:    `const RuleA = "a"; var Rules = []Rule{{Name: RuleA}}`,
			seq:      `func (r *runner) seq() { r.skip(RuleA, "n", "why") }`,
			sites:    []string{""},
			problems: []string{"rule a (RuleA) has no judge, and no code reports it but to skip it"},
		},
		{
			name:     "declared without an entry",
			rules:    `const (RuleA = "a"; RuleB = "b"); var Rules = []Rule{{Name: RuleA}}`,
			seq:      `func (r *runner) seq() { r.check(RuleA, "n", "", nil); r.check(RuleB, "n", "", nil) }`,
			sites:    []string{"`runner.seq` (seq.go)"},
			problems: []string{"rule b (RuleB) has no entry in Rules, so the docs do not list it"},
		},
		{
			name:     "an entry that is no rule",
			rules:    `const RuleA = "a"; var Rules = []Rule{{Name: RuleA}, {Name: "b"}}`,
			seq:      `func (r *runner) seq() { r.check(RuleA, "n", "", nil) }`,
			sites:    []string{"`runner.seq` (seq.go)"},
			problems: []string{`the entry of Rules named "b" is not a Rule constant`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			files := map[string]*ast.File{}
			for name, src := range map[string]string{"rules.go": "package conformance\n" + tt.rules, "seq.go": "package conformance\n" + tt.seq, "judges.go": judges} {
				f, err := parser.ParseFile(fset, name, src, 0)
				if err != nil {
					t.Fatal(err)
				}
				files[name] = f
			}
			sites, problems := readRuleSites(files)
			var got []string
			for _, s := range sites {
				got = append(got, s.String())
			}
			if !slices.Equal(got, tt.sites) || !slices.Equal(problems, tt.problems) {
				t.Errorf("sites %q, problems %q; want %q, %q", got, problems, tt.sites, tt.problems)
			}
		})
	}
}
