package conformance

import (
	"strings"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// Exports describes what a module exports, as validate, call and test show
// it: its capabilities, and its optional exports (abi.OptionalExports) by
// method name, followed by those it could add to its capabilities.
func Exports(info host.Info) (capabilities, optional string) {
	caps := make([]string, len(info.Capabilities))
	for i, c := range info.Capabilities {
		caps[i] = string(c)
	}
	var has, could []string
	for _, o := range abi.OptionalExports {
		name := o.Export
		if m, ok := abi.LookupMethod(o.Export); ok {
			name = m.Name
		}
		switch {
		case info.Exports(o.Export):
			has = append(has, name)
		case info.Supports(o.Requires):
			could = append(could, name+" (for "+string(o.Requires)+")")
		}
	}
	optional = orNone(strings.Join(has, ", "))
	if len(could) > 0 {
		optional += "; could add " + strings.Join(could, ", ")
	}
	return orNone(strings.Join(caps, ", ")), optional
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
