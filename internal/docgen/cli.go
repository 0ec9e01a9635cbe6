package docgen

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/wasmccm/wasmccm/internal/ccmcli"
	"github.com/wasmccm/wasmccm/internal/wasmccmcli"
)

// cliPage documents both commands: the CCM's flags, walked on the command
// it runs, and each wasmccm subcommand's own -h.
func cliPage() (string, error) {
	cmd, err := ccmcli.NewCommand()
	if err != nil {
		return "", err
	}
	var rows [][]string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name += ", `-" + f.Shorthand + "`"
		}
		usage := oneLine(f.Usage)
		if f.Deprecated != "" {
			usage = "Deprecated: " + oneLine(f.Deprecated) + " " + usage
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "[]" {
			def = "`" + f.DefValue + "`"
		}
		rows = append(rows, []string{name, f.Value.Type(), cell(def), cell(usage)})
	})
	var b strings.Builder
	b.WriteString("# Command-line reference\n\n## wasm-cloud-controller-manager\n\n" +
		"The flags of Kubernetes' cloud-controller-manager (`k8s.io/cloud-provider`), with `--cloud-provider=wasm` and " +
		"`--cloud-config` naming the [cloud-config](cloud-config.md); `--controllers` also knows `orphan-load-balancer-sweep`.\n\n")
	b.WriteString(table([]string{"flag", "type", "default", "meaning"}, rows))

	b.WriteString("\n## wasmccm\n\nThe module author's tool.\n\n")
	usage, code := runWasmccm("help")
	if code != 0 {
		return "", fmt.Errorf("wasmccm help exited %d: %s", code, usage)
	}
	b.WriteString(codeBlock(usage))
	for line := range strings.Lines(usage) {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "wasmccm" {
			continue
		}
		sub := fields[1]
		help, code := runWasmccm(sub, "-h")
		if code != 0 {
			return "", fmt.Errorf("wasmccm %s -h exited %d: %s", sub, code, help)
		}
		if help == usage {
			continue // no flags of its own
		}
		b.WriteString("\n### wasmccm " + sub + "\n\n" + codeBlock(help))
	}
	return b.String(), nil
}

// runWasmccm runs the tool with args and returns what it printed.
func runWasmccm(args ...string) (string, int) {
	var out bytes.Buffer
	code := wasmccmcli.Run(args, strings.NewReader(""), &out, &out)
	return out.String(), code
}

func codeBlock(text string) string {
	return "```\n" + strings.TrimRight(text, "\n") + "\n```\n"
}
