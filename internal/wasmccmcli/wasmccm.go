// Package wasmccmcli is the wasmccm tool's command line: Run parses the
// arguments of one subcommand and runs it; cmd/wasmccm is its main, and
// docs/reference/cli.md shows each subcommand's -h.
package wasmccmcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/conformance"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/provider"
)

const usage = `usage:
  wasmccm init [-module PATH] NAME                         scaffold a provider module in ./NAME
  wasmccm test [-config FILE] [-spec FILE] [-junit FILE] [-rate N] MODULE  conformance suite with fault injection
  wasmccm validate MODULE                                  check a module against ABI v%d
  wasmccm call [-config FILE] [-input FILE|-] [-repeat N] [-trace] MODULE METHOD  call a method once per JSON input line
  wasmccm methods                                          list the methods and their exports
  wasmccm push [-docker-config FILE] MODULE REF            push a module as a Wasm OCI artifact; prints REPO@sha256:DIGEST
  wasmccm pull [-docker-config FILE] [-allow-tags] [-o FILE] REF  pull a module, checked against the digest in REF
`

// Run runs the subcommand args[0] with the arguments after it and returns
// the exit code: 0 on success, 1 on failure, 2 on a usage error.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, usage, abi.Version)
		return 2
	}
	if len(args) > 1 && isHelp(args[1]) && (args[0] == "validate" || args[0] == "methods") {
		fmt.Fprintf(stdout, usage, abi.Version)
		return 0
	}
	var err error
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(stdout, usage, abi.Version)
		return 0
	case "init":
		err = initCommand(args[1:], stdout)
	case "validate":
		return validate(args[1:], stdout, stderr)
	case "test":
		return testCommand(args[1:], stdout, stderr)
	case "call":
		err = call(args[1:], stdin, stdout, stderr)
	case "push":
		err = push(args[1:], stdout)
	case "pull":
		err = pull(args[1:], stdout)
	case "methods":
		for _, m := range abi.Methods {
			fmt.Fprintf(stdout, "%-30s %s\n", m.Name, m.Export)
		}
	default:
		fmt.Fprintf(stderr, usage, abi.Version)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0 // the flag set printed its usage
	}
	if err != nil {
		fmt.Fprintln(stderr, "wasmccm:", err)
		return 1
	}
	return 0
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

func validate(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "wasmccm validate: want exactly one MODULE, the .wasm file (.wasm.gz too): wasmccm validate mycloud.wasm")
		return 2
	}
	wasm, err := provider.ReadModule(cloudconfig.Module{Path: args[0]})
	if err != nil {
		fmt.Fprintln(stderr, "wasmccm:", err)
		return 1
	}
	info, problems := host.Validate(context.Background(), wasm, "")
	fmt.Fprintf(stdout, "module:       %s (%d bytes)\n", args[0], len(wasm))
	fmt.Fprintf(stdout, "ABI version:  %d (host implements %d)\n", info.ABIVersion, abi.Version)
	caps, optional := conformance.Exports(info)
	fmt.Fprintf(stdout, "capabilities: %s\n", caps)
	fmt.Fprintf(stdout, "optional:     %s\n", optional)
	if slices.Contains(info.Imports, abi.ImportCredential) {
		fmt.Fprintln(stdout, "credentials:  imports credential: reads raw secrets, which only credentials.readable serves (it weakens isolation); name credentials in requests instead")
	} else {
		fmt.Fprintln(stdout, "credentials:  does not import credential: it cannot read a secret")
	}
	if len(problems) > 0 {
		fmt.Fprintln(stdout, "problems:")
		for _, p := range problems {
			fmt.Fprintln(stdout, "  -", p)
		}
		return 1
	}
	fmt.Fprintln(stdout, "valid")
	return 0
}

// callUsage is call's help: what the input is, and what it prints.
const callUsage = `usage: wasmccm call [-config CLOUD-CONFIG] [-input FILE|-] [-repeat N] [-trace] MODULE METHOD

Calls METHOD of MODULE once for each JSON input, one input a line
(newline-delimited JSON; blank lines are skipped), and prints each answer
as one line of JSON on standard output. No input at all makes one call
with the empty input. The calls share one module, and so its shared state,
as the CCM's calls do: a snapshot one call keeps serves the next.
Standard error gets one line per call: its requests to the cloud and its
time. A malformed input is an error naming its line, before any call; a
call that fails ends the run.

Inputs are the abi package's types as JSON (wasmccm methods lists the
methods): a Node is {"Name":"node-1","ProviderID":"mycloud://i-1"}; a
method taking a string, such as InstanceTypeByProviderID, takes a JSON
string with its quotes: "mycloud://i-1".

`

// call calls one method of a module for each of its inputs, on one
// module, and prints each answer and what each call cost.
func call(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "cloud-config YAML granting HTTP origins and credentials and carrying providerConfig; FILE#NAME for module NAME of a cloud-config of several")
	inputPath := fs.String("input", "-", "file of JSON inputs, one a line; - for standard input")
	repeat := fs.Int("repeat", 1, "make the calls of the inputs this many times over, in order")
	trace := fs.Bool("trace", false, "print the module's HTTP requests (method, URL, status, duration) and log lines to standard error, credentials redacted")
	fs.Usage = func() {
		fmt.Fprint(stderr, callUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("call: want MODULE and METHOD, got %d arguments; see 'wasmccm call -h'", fs.NArg())
	}
	if *repeat < 1 {
		return fmt.Errorf("call: -repeat %d: want 1 or more", *repeat)
	}
	modulePath, methodName := fs.Arg(0), fs.Arg(1)
	method, ok := abi.LookupMethod(methodName)
	if !ok {
		return fmt.Errorf("unknown method %q; see 'wasmccm methods'", methodName)
	}
	cfg, err := loadConfig(*configPath, modulePath)
	if err != nil {
		return err
	}
	inputs, err := readInputs(*inputPath, stdin, method.Input)
	if err != nil {
		return err
	}
	wasm, err := provider.ReadModule(cfg.Module)
	if err != nil {
		return err
	}
	secrets, err := moduleSecrets(cfg.Credentials)
	if err != nil {
		return err
	}
	ctx := context.Background()
	hostConfig := provider.HostConfig(cfg, filepath.Base(modulePath))
	recorder := recordCalls(&hostConfig, secrets, *trace, stderr)
	mod, err := host.New(ctx, wasm, hostConfig)
	if err != nil {
		return err
	}
	defer mod.Close(ctx)
	caps, optional := conformance.Exports(mod.Info())
	if *trace {
		fmt.Fprintf(stderr, "trace: module capabilities %s; optional exports %s\n", caps, optional)
	}
	if optionalExport(method.Export) && !mod.Info().Exports(method.Export) {
		return fmt.Errorf("the module does not export %s (%s), which is optional; its optional exports: %s", method.Export, method.Name, optional)
	}
	enc := json.NewEncoder(stdout)
	n := 0
	for range *repeat {
		for _, in := range inputs {
			n++
			name := fmt.Sprintf("call %d", n)
			if in.line > 0 {
				name += fmt.Sprintf(" (input line %d)", in.line)
			}
			var output abi.Message
			if method.Output != nil {
				output = method.Output()
			}
			mark, start := recorder.mark(), time.Now()
			err := mod.Call(ctx, method.Export, in.message, output)
			recorder.report(name, mark, time.Since(start))
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			var answer any = output
			if output == nil {
				answer = map[string]string{"status": abi.StatusOK.String()}
			}
			if err := enc.Encode(answer); err != nil {
				return err
			}
		}
	}
	return nil
}

// optionalExport reports whether export is one of abi.OptionalExports.
func optionalExport(export string) bool {
	for _, o := range abi.OptionalExports {
		if o.Export == export {
			return true
		}
	}
	return false
}

// loadConfig reads a cloud-config when given; the module path on the
// command line wins over the one in the file. FILE#NAME picks the module
// NAME of a cloud-config of several modules; a lone module needs no name.
func loadConfig(path, modulePath string) (*cloudconfig.Config, error) {
	if path == "" {
		return &cloudconfig.Config{Module: cloudconfig.Module{Path: modulePath}}, nil
	}
	path, name, _ := strings.Cut(path, "#")
	file, err := cloudconfig.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := file.Pick(name)
	if err != nil {
		return nil, fmt.Errorf("%w (-config FILE#NAME)", err)
	}
	cfg.Module.Path = modulePath
	return cfg, nil
}

// callInput is one input of call, with the line it starts on (0 for the
// empty input made up when there is none).
type callInput struct {
	message abi.Message
	line    int
}

// readInputs decodes the JSON values of path (- for stdin), one call's
// input each. Inputs are meant one a line, but a value may span lines, so
// that a file holding one indented input still works.
func readInputs(path string, stdin io.Reader, newInput func() abi.Message) ([]callInput, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var inputs []callInput
	for {
		rest := data[dec.InputOffset():]
		start := len(data) - len(bytes.TrimLeft(rest, " \t\r\n"))
		line := 1 + bytes.Count(data[:start], []byte("\n"))
		in := newInput()
		err := dec.Decode(in)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("input line %d: %w; each input is one JSON value of the method's input type, see 'wasmccm call -h'", line, err)
		}
		inputs = append(inputs, callInput{in, line})
	}
	if len(inputs) == 0 {
		inputs = append(inputs, callInput{newInput(), 0})
	}
	return inputs, nil
}
