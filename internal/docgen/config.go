package docgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"reflect"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/provider"
)

var (
	durationType = reflect.TypeFor[cloudconfig.Duration]()
	rawType      = reflect.TypeFor[json.RawMessage]()
	selectorType = reflect.TypeFor[metav1.LabelSelector]()
)

// configSection is one object of the cloud-config: its YAML path, the doc
// comment of its Go type and a row per field.
type configSection struct {
	path, doc string
	rows      [][]string
}

// cloudConfigPage documents cloudconfig.File's two forms: one module's
// Config, then a list of modules, following their field types by
// reflection into whichever package declares them.
func cloudConfigPage(s *sources) (string, error) {
	var one, several []*configSection
	if err := walkConfig(s, &one, "", reflect.TypeFor[cloudconfig.Config](), reflect.ValueOf(provider.Defaults()), false); err != nil {
		return "", err
	}
	if err := walkConfig(s, &several, "", reflect.TypeFor[cloudconfig.File](), reflect.Value{}, true); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# cloud-config reference\n\n" +
		"The file `--cloud-config` names, in YAML (`internal/docgen` reads it from `runtime/cloudconfig`): " +
		"one module's `Config`, or a `File` that lists [several modules](#several-modules). " +
		"Unknown fields are refused. A default is what an absent or zero field means (`provider.Defaults`); " +
		"limits are the values `cloudconfig.Parse` accepts, found by trying them.\n")
	writeSections(&b, one, "Top level", "##")
	b.WriteString("\n## Several modules\n\n" +
		"A cloud-config with a top-level `modules` list serves several modules from one CCM " +
		"(`runtime/assembly`; how-to: [docs/hybrid.md](../hybrid.md)). " +
		"Each entry takes every field of the one-module cloud-config above, with the entry's own values.\n")
	writeSections(&b, several, "Several modules: top level", "###")
	return b.String(), nil
}

func writeSections(b *strings.Builder, sections []*configSection, top, heading string) {
	for _, sec := range sections {
		title := top
		if sec.path != "" {
			title = "`" + sec.path + "`"
		}
		b.WriteString("\n" + heading + " " + title + "\n\n")
		if sec.doc != "" {
			b.WriteString(sec.doc + "\n\n")
		}
		b.WriteString(table([]string{"field", "type", "default", "limits", "meaning"}, sec.rows))
	}
}

// walkConfig adds the section of struct type t at path, then those of its
// fields' object types. def is t's defaults, invalid within lists, which
// have none; inList also turns off the search for limits.
func walkConfig(s *sources, sections *[]*configSection, path string, t reflect.Type, def reflect.Value, inList bool) error {
	spec, typeDoc := s.typeSpec(t.PkgPath(), t.Name())
	if spec == nil {
		return fmt.Errorf("no declaration of %s.%s in the module's sources", t.PkgPath(), t.Name())
	}
	fieldDocs := map[string]string{}
	if st, ok := spec.Type.(*ast.StructType); ok {
		for _, f := range st.Fields.List {
			for _, name := range f.Names {
				fieldDocs[name.Name] = oneLine(f.Doc.Text())
			}
		}
	}
	sec := &configSection{path: path, doc: typeDoc}
	*sections = append(*sections, sec)
	type nested struct {
		path   string
		t      reflect.Type
		def    reflect.Value
		inList bool
	}
	var children []nested
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || key == "-" {
			continue
		}
		if f.Anonymous && key == "" {
			sec.rows = append(sec.rows, []string{"every field of the [top level](#top-level)", "—", "—", "—", "the embedded " + typeName(f.Type)})
			continue
		}
		if key == "" {
			return fmt.Errorf("%s.%s has no json tag", t.Name(), f.Name)
		}
		full := strings.TrimPrefix(path+"."+key, ".")
		var fieldDef reflect.Value
		if def.IsValid() {
			fieldDef = def.Field(i)
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		typ := typeName(ft)
		switch {
		case isObject(ft):
			children = append(children, nested{full, ft, deref(fieldDef), inList})
			typ = "object, see " + link(full)
		case ft.Kind() == reflect.Slice && isObject(ft.Elem()):
			children = append(children, nested{full + "[]", ft.Elem(), reflect.Value{}, true})
			typ = "list of objects, see " + link(full+"[]")
		}
		limits := ""
		if !inList {
			limits = probeLimits(full, ft)
		}
		sec.rows = append(sec.rows, []string{"`" + key + "`", typ, cell(defaultOf(fieldDef)), cell(limits), cell(fieldDocs[f.Name])})
	}
	for _, c := range children {
		if err := walkConfig(s, sections, c.path, c.t, c.def, c.inList); err != nil {
			return err
		}
	}
	return nil
}

func isObject(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t != durationType && t != selectorType
}

func deref(v reflect.Value) reflect.Value {
	if v.IsValid() && v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		return v.Elem()
	}
	return v
}

// link is a Markdown link to the section of path, by GitHub's anchors.
func link(path string) string {
	anchor := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return -1
	}, strings.ToLower(path))
	return "[`" + path + "`](#" + anchor + ")"
}

func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration (`30s`, `10m`)"
	case t == rawType:
		return "any YAML"
	case t == selectorType:
		return "label selector (`matchLabels`, `matchExpressions`)"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return "integer"
	case reflect.Slice:
		return "list of " + typeName(t.Elem()) + "s"
	}
	return t.String()
}

// defaultOf renders a field of provider.Defaults, "" when it has none.
func defaultOf(v reflect.Value) string {
	v = deref(v)
	if !v.IsValid() || v.IsZero() {
		return ""
	}
	if d, ok := v.Interface().(cloudconfig.Duration); ok {
		return "`" + shortDuration(d.Duration) + "`"
	}
	if isObject(v.Type()) {
		return ""
	}
	return fmt.Sprintf("`%v`", v.Interface())
}

// shortDuration drops time.Duration's zero units: 2m, not 2m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// probeLimits finds the range of values cloudconfig.Parse accepts for the
// number or duration at path, all else left to its default.
func probeLimits(path string, t reflect.Type) string {
	switch {
	case t == durationType:
		return durationLimits(func(d time.Duration) bool { return accepts(path, d.String()) })
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return intLimits(func(n int64) bool { return accepts(path, n) })
	}
	return ""
}

// accepts reports whether a cloud-config with path set to value, and a
// module path, parses.
func accepts(path string, value any) bool {
	doc := map[string]any{"module": map[string]any{"path": "module.wasm"}}
	keys := strings.Split(path, ".")
	m := doc
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = value
	data, err := yaml.Marshal(doc)
	if err != nil {
		return false
	}
	_, err = cloudconfig.Parse(bytes.NewReader(data))
	return err == nil
}

// intLimits renders the accepted range of an integer: its lower bound
// when negatives are refused, its upper bound when a large value is.
func intLimits(ok func(int64) bool) string {
	const large = 1<<31 - 1
	if ok(-1) || !ok(0) {
		return ""
	}
	if ok(large) {
		return "≥ 0"
	}
	// The largest accepted value, between 0 (accepted) and large (not).
	high := int64(sort.Search(large, func(n int) bool { return !ok(int64(n)) })) - 1
	return fmt.Sprintf("0..%d", high)
}

// durationLimits renders the accepted range of a duration: not negative,
// and the shortest accepted when short ones are refused.
func durationLimits(ok func(time.Duration) bool) string {
	if ok(-time.Second) || !ok(0) {
		return ""
	}
	if ok(time.Nanosecond) || !ok(time.Hour) {
		return "≥ 0"
	}
	shortest := time.Duration(sort.Search(int(time.Hour), func(n int) bool { return ok(time.Duration(n)) }))
	return "0 (the default) or ≥ " + shortDuration(shortest)
}
