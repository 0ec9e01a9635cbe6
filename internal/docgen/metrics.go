package docgen

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"slices"
	"strings"

	"k8s.io/component-base/metrics"
)

// metricNamespace is the namespace of wasmccm's own metrics; the CCM's
// /metrics also serves the upstream controllers', client-go's and the Go
// runtime's, which their projects document.
const metricNamespace = "wasmccm"

// metric is one metric definition found in the sources.
type metric struct {
	name, kind, help, stability string
	labels                      []string
}

// metricsPage lists the metrics the module's packages define with
// component-base's (or Prometheus') constructors. Reading the definitions
// rather than gathering a registry lists the vectors that have no series
// yet, which a registry leaves out; their options are evaluated as Go
// constants, so a name or help text made at run time is an error here.
func metricsPage(s *sources) (string, error) {
	var found []metric
	for _, path := range s.order {
		if strings.Contains(path, "/test/") {
			continue
		}
		for _, f := range s.pkgs[path] {
			var err error
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || err != nil {
					return err == nil
				}
				var m *metric
				if m, err = metricOf(call); m != nil && err == nil && strings.HasPrefix(m.name, metricNamespace+"_") {
					found = append(found, *m)
				}
				if err != nil {
					err = fmt.Errorf("%s: %w", s.fset.Position(call.Pos()), err)
				}
				return true
			})
			if err != nil {
				return "", err
			}
		}
	}
	slices.SortFunc(found, func(a, b metric) int { return strings.Compare(a.name, b.name) })
	rows := make([][]string, len(found))
	for i, m := range found {
		labels := make([]string, len(m.labels))
		for j, l := range m.labels {
			labels[j] = "`" + l + "`"
		}
		rows[i] = []string{"`" + m.name + "`", m.kind, cell(strings.Join(labels, ", ")), cell(m.stability), cell(m.help)}
	}
	return "# Metrics reference\n\n" +
		"The metrics wasmccm itself adds to the CCM's `/metrics` (served on the secure port with the upstream controllers' own, " +
		"which Kubernetes documents). Every one is in the `" + metricNamespace + "` namespace.\n\n" +
		table([]string{"metric", "type", "labels", "stability", "help"}, rows), nil
}

// metricOf reads call when it is metrics.NewCounterVec(&opts, labels) or
// another metric constructor, nil otherwise.
func metricOf(call *ast.CallExpr) (*metric, error) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || len(call.Args) == 0 {
		return nil, nil
	}
	if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "metrics" && pkg.Name != "prometheus" {
		return nil, nil
	}
	kind := strings.TrimSuffix(strings.TrimPrefix(sel.Sel.Name, "New"), "Vec")
	if !slices.Contains([]string{"Counter", "Gauge", "Histogram", "Summary"}, kind) {
		return nil, nil
	}
	opts := call.Args[0]
	if u, ok := opts.(*ast.UnaryExpr); ok && u.Op == token.AND {
		opts = u.X
	}
	lit, ok := opts.(*ast.CompositeLit)
	if !ok {
		return nil, fmt.Errorf("%s's options are not a literal", sel.Sel.Name)
	}
	fields := map[string]string{}
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		key, ok2 := kv.Key.(*ast.Ident)
		if !ok || !ok2 {
			continue
		}
		switch key.Name {
		case "Namespace", "Subsystem", "Name", "Help":
			v, err := stringConstant(kv.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key.Name, err)
			}
			fields[key.Name] = v
		case "StabilityLevel":
			if sel, ok := kv.Value.(*ast.SelectorExpr); ok {
				fields["StabilityLevel"] = sel.Sel.Name
			}
		}
	}
	m := &metric{
		name:      metrics.BuildFQName(fields["Namespace"], fields["Subsystem"], fields["Name"]),
		kind:      strings.ToLower(kind),
		help:      fields["Help"],
		stability: fields["StabilityLevel"],
	}
	if len(call.Args) > 1 {
		labels, ok := call.Args[1].(*ast.CompositeLit)
		if !ok {
			return nil, fmt.Errorf("%s: the labels of %s are not a literal", sel.Sel.Name, m.name)
		}
		for _, e := range labels.Elts {
			l, err := stringConstant(e)
			if err != nil {
				return nil, fmt.Errorf("a label of %s: %w", m.name, err)
			}
			m.labels = append(m.labels, l)
		}
	}
	return m, nil
}

// stringConstant evaluates a string literal or a sum of them.
func stringConstant(e ast.Expr) (string, error) {
	v, err := constantOf(e)
	if err != nil {
		return "", err
	}
	if v.Kind() != constant.String {
		return "", fmt.Errorf("not a string")
	}
	return constant.StringVal(v), nil
}

func constantOf(e ast.Expr) (constant.Value, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		return constant.MakeFromLiteral(e.Value, e.Kind, 0), nil
	case *ast.ParenExpr:
		return constantOf(e.X)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, err := constantOf(e.X)
			if err != nil {
				return nil, err
			}
			y, err := constantOf(e.Y)
			if err != nil {
				return nil, err
			}
			return constant.BinaryOp(x, token.ADD, y), nil
		}
	}
	return nil, fmt.Errorf("%T is not a literal the reference can read; write the value out", e)
}
