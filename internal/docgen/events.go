package docgen

import (
	"fmt"
	"go/ast"
	"go/token"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/runtime/events"
)

const eventsPackage = "github.com/wasmccm/wasmccm/runtime/events"

// reasonTypes are the Go types of runtime/events' reasons, by name.
var reasonTypes = map[string]events.Reason{"Normal": events.Normal(""), "Warning": events.Warning("")}

// eventsPage lists runtime/events' reasons, a table per constant block
// under the block's doc comment, each reason with the doc comment that
// says when it is recorded.
func eventsPage(s *sources) (string, error) {
	var b strings.Builder
	b.WriteString("# Events reference\n\n" +
		"The Events the CCM records, from `runtime/events`. The source is `wasm-cloud-controller-manager`.\n")
	for _, f := range s.pkgs[eventsPackage] {
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			var rows [][]string
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				typ, ok := vs.Type.(*ast.Ident)
				if !ok || reasonTypes[typ.Name] == nil || len(vs.Names) != 1 || len(vs.Values) != 1 {
					return "", fmt.Errorf("%s: an Event reason is one constant of type Normal or Warning", s.fset.Position(vs.Pos()))
				}
				lit, ok := vs.Values[0].(*ast.BasicLit)
				if !ok {
					return "", fmt.Errorf("%s: %s is not a string literal", s.fset.Position(vs.Pos()), vs.Names[0])
				}
				reason, err := strconv.Unquote(lit.Value)
				if err != nil {
					return "", err
				}
				when := strings.TrimPrefix(oneLine(vs.Doc.Text()), vs.Names[0].Name+": ")
				rows = append(rows, []string{"`" + reason + "`", reasonTypes[typ.Name].Type(), cell(when)})
			}
			slices.SortFunc(rows, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
			b.WriteString("\n" + oneLine(gen.Doc.Text()) + "\n\n" + table([]string{"reason", "type", "when"}, rows))
		}
	}
	return b.String(), nil
}
