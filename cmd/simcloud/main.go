// Command simcloud serves the simulated cloud API (package
// examples/simcloud) over HTTP, for demos and for running the
// cloud-controller-manager against something cloud-like on a laptop.
//
// Usage:
//
//	simcloud --token-file token.txt --seed-instances nodes.json
//
// See examples/simcloud/README.md for the API.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/wasmccm/wasmccm/examples/simcloud"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, os.Args[1:], os.Stderr, logger, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		logger.Error("simcloud failed", "err", err)
		os.Exit(1)
	}
}

// shutdownTimeout bounds how long in-flight requests may take to finish
// after a signal.
const shutdownTimeout = 5 * time.Second

// run parses args, serves until ctx is done and then shuts down gracefully.
// ready, if set, is called with the listening address once requests are
// accepted.
func run(ctx context.Context, args []string, output io.Writer, logger *slog.Logger, ready func(net.Addr)) error {
	opts, listen, err := parseFlags(args, output)
	if err != nil {
		return err
	}
	opts.Logger = logger
	if err := opts.Validate(); err != nil {
		return err
	}
	cloud := simcloud.New(opts)

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	// Requests held by injected latency are cancelled on shutdown instead
	// of delaying it.
	baseCtx, cancelRequests := context.WithCancel(context.Background())
	defer cancelRequests()
	srv := &http.Server{
		Handler:           cloud.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("simcloud listening", "addr", ln.Addr().String(),
		"instances", len(opts.Instances), "auth", opts.Token != "", "adminAuth", opts.AdminToken != "")
	if ready != nil {
		ready(ln.Addr())
	}

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	cancelRequests()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return err
	}
	return nil
}

func parseFlags(args []string, output io.Writer) (simcloud.Options, string, error) {
	fs := flag.NewFlagSet("simcloud", flag.ContinueOnError)
	fs.SetOutput(output)
	var (
		listen         = fs.String("listen", "127.0.0.1:8780", "address to listen on")
		token          = fs.String("token", "", "bearer token required on /v1")
		tokenFile      = fs.String("token-file", "", "file holding the /v1 bearer token")
		adminToken     = fs.String("admin-token", "", "bearer token required on /admin (default: /admin is open)")
		adminTokenFile = fs.String("admin-token-file", "", "file holding the /admin bearer token")
		seedFile       = fs.String("seed-instances", "", "JSON file with a list of instances to create at start (and on reset)")
		pool           = fs.String("ip-pool", simcloud.DefaultIPPool.String(), "CIDR load balancer IPs are allocated from")
		poolStart      = fs.String("ip-pool-start", "", "first load balancer IP to allocate (default: pool base + 10)")
		seed           = fs.Uint64("seed", 1, "seed of the fault-injection RNG")
		latency        = fs.Duration("latency", 0, "latency added to every /v1 request")
		rateLimit      = fs.Float64("rate-limit", 0, "/v1 requests per second before 429 (0: unlimited)")
		burst          = fs.Int("burst", 0, "rate limit burst (default: ceil of --rate-limit)")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: simcloud --token TOKEN | --token-file FILE [flags]\n\nServes the simulated cloud API.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return simcloud.Options{}, "", err
	}
	if fs.NArg() > 0 {
		return simcloud.Options{}, "", fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	var opts simcloud.Options
	var err error
	if opts.Token, err = readToken("token", *token, *tokenFile, true); err != nil {
		return opts, "", err
	}
	if opts.AdminToken, err = readToken("admin-token", *adminToken, *adminTokenFile, false); err != nil {
		return opts, "", err
	}
	if opts.IPPool, err = netip.ParsePrefix(*pool); err != nil {
		return opts, "", fmt.Errorf("--ip-pool: %w", err)
	}
	if *poolStart != "" {
		if opts.IPPoolStart, err = netip.ParseAddr(*poolStart); err != nil {
			return opts, "", fmt.Errorf("--ip-pool-start: %w", err)
		}
	}
	if *seedFile != "" {
		if opts.Instances, err = loadInstances(*seedFile); err != nil {
			return opts, "", err
		}
	}
	opts.Seed = *seed
	opts.Global = simcloud.Global{Latency: *latency, RateLimit: *rateLimit, Burst: *burst}
	return opts, *listen, nil
}

// readToken returns the token given directly or in a file (trimmed, so a
// trailing newline does not become part of it).
func readToken(name, value, file string, required bool) (string, error) {
	switch {
	case value != "" && file != "":
		return "", fmt.Errorf("--%s and --%s-file are mutually exclusive", name, name)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--%s-file: %w", name, err)
		}
		value = strings.TrimSpace(string(b))
		if value == "" {
			return "", fmt.Errorf("--%s-file: %s is empty", name, file)
		}
	case required && value == "":
		return "", fmt.Errorf("--%s or --%s-file is required", name, name)
	}
	return value, nil
}

// loadInstances reads a JSON array of instances, in the shape of
// POST /admin/instances bodies. Unknown fields are errors.
func loadInstances(path string) ([]simcloud.Instance, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--seed-instances: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var out []simcloud.Instance
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("--seed-instances %s: %w", path, err)
	}
	return out, nil
}
