package host

import "github.com/wasmccm/wasmccm/abi"

// The indices of the entries every call goes through, first in entries.
const (
	entryABIVersion uint32 = iota
	entryAlloc
	entrySetDeadline
)

// entries are every export the host calls, in the order of the entry
// indices loopcheck.EnterExport takes; entryIndex finds one's index.
var entries, entryIndex = func() ([]string, map[string]uint32) {
	names := []string{abi.ExportABIVersion, abi.ExportAlloc, abi.ExportSetDeadline, abi.ExportInit}
	for _, c := range abi.Capabilities {
		names = append(names, c.Exports...)
	}
	for _, o := range abi.OptionalExports {
		names = append(names, o.Export)
	}
	index := make(map[string]uint32, len(names))
	for i, name := range names {
		index[name] = uint32(i)
	}
	return names, index
}()
