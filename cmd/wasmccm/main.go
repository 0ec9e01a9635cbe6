// Command wasmccm is the module author's tool: it validates a provider
// module against the ABI and calls its methods one at a time, with the same
// runtime and sandbox the CCM uses.
//
//	wasmccm init [-module PATH] NAME
//	wasmccm validate MODULE
//	wasmccm call [-config CLOUD-CONFIG] [-input FILE] [-repeat N] [-trace] MODULE METHOD
//	wasmccm test [-config CLOUD-CONFIG] [-spec TEST-SPEC] [-junit FILE] [-rate N] MODULE
//	wasmccm methods
//	wasmccm push [-docker-config FILE] MODULE REF
//	wasmccm pull [-docker-config FILE] [-allow-tags] [-o FILE] REF
package main

import (
	"os"

	"github.com/wasmccm/wasmccm/internal/wasmccmcli"
)

func main() { os.Exit(wasmccmcli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
