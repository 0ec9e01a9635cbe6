package wasmccmcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmccm/wasmccm/internal/conformance"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/provider"
)

// testCommand runs the conformance suite (package internal/conformance)
// against the cloud the cloud-config points at, and exits 1 when a rule is
// broken.
func testCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "cloud-config YAML: the module's HTTP origins, credentials and providerConfig; FILE#NAME for module NAME of a cloud-config of several")
	specPath := fs.String("spec", "", "test-spec YAML: the nodes to check and the test load balancer")
	junitPath := fs.String("junit", "", "also write the report as JUnit XML to this file")
	rate := fs.Float64("rate", conformance.DefaultRate, "requests per second sent to the cloud, 0 for no pacing; the cloud's own 429s are waited out with their Retry-After and never scored")
	maxRequests := fs.Int("max-requests", 0, "stop sending requests to the cloud after this many, and skip the checks after them; 0 for no cap")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wasmccm test [-config CLOUD-CONFIG] [-spec TEST-SPEC] [-junit FILE] [-rate N] [-max-requests N] MODULE")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "wasmccm test: want exactly one MODULE, after the flags: wasmccm test -config cloud-config.yaml -spec test-spec.yaml mycloud.wasm; see wasmccm test -h")
		return 2
	}
	report, err := runConformance(*configPath, *specPath, fs.Arg(0), *rate, *maxRequests, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "wasmccm test:", err)
		return 1
	}
	if err := report.WriteText(stdout); err != nil {
		fmt.Fprintln(stderr, "wasmccm test:", err)
		return 1
	}
	if *junitPath != "" {
		if err := writeJUnit(*junitPath, report); err != nil {
			fmt.Fprintln(stderr, "wasmccm test:", err)
			return 1
		}
	}
	if report.Failed() > 0 {
		return 1
	}
	return 0
}

// runConformance runs the suite, and first says on stderr what it may cost
// the cloud: a run makes every checked call once per fault and per
// request of its clean run, which against a real cloud can be a good part
// of an hour's rate limit.
func runConformance(configPath, specPath, modulePath string, rate float64, maxRequests int, stderr io.Writer) (*conformance.Report, error) {
	cfg, err := loadConfig(configPath, modulePath)
	if err != nil {
		return nil, err
	}
	spec := &conformance.Spec{}
	if specPath != "" {
		if spec, err = conformance.ReadSpec(specPath); err != nil {
			return nil, err
		}
	}
	wasm, err := provider.ReadModule(cfg.Module)
	if err != nil {
		return nil, err
	}
	secrets, err := moduleSecrets(cfg.Credentials)
	if err != nil {
		return nil, err
	}
	if lc := spec.LimitedCredentials; lc != nil {
		limited := cfg.Credentials
		limited.Dir = lc.Dir
		more, err := moduleSecrets(limited)
		if err != nil {
			return nil, err
		}
		secrets = append(secrets, more...)
	}
	fmt.Fprintln(stderr, costNote(maxRequests, spec))
	name := filepath.Base(modulePath)
	return conformance.Run(context.Background(), conformance.Options{
		Name: name, Wasm: wasm, Host: provider.HostConfig(cfg, name), Spec: spec, Secrets: secrets, Rate: rate, MaxRequests: maxRequests,
	})
}

// costNote is what the run may cost the cloud, as the command says it
// before it starts.
func costNote(maxRequests int, spec *conformance.Spec) string {
	const each = "each checked call runs once clean, then once per fault (8) and per request of its clean run, so a call of r requests costs up to about 8r²+r, and a run hundreds to thousands"
	limit := ""
	if spec.RateLimit != nil {
		limit = fmt.Sprintf(", against a cloud allowing %d an hour", spec.RateLimit.PerHour)
	}
	if maxRequests > 0 {
		return fmt.Sprintf("wasmccm test: at most %d requests to the cloud (-max-requests)%s; %s", maxRequests, limit, each)
	}
	return fmt.Sprintf("wasmccm test: no cap on requests to the cloud%s (-max-requests N sets one); %s", limit, each)
}

// moduleSecrets reads the values of the Secret keys the credentials name,
// which the suite looks for where they must not appear.
func moduleSecrets(c credentials.Config) ([]string, error) {
	var secrets []string
	for _, key := range c.SecretKeys() {
		b, err := os.ReadFile(filepath.Join(c.Dir, key))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if v := strings.TrimSpace(string(b)); v != "" {
			secrets = append(secrets, v)
		}
	}
	return secrets, nil
}

func writeJUnit(path string, report *conformance.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := report.WriteJUnit(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
