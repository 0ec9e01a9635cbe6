package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
)

// pollInterval is short because readiness is usually reached within two
// seconds and every interval adds to each test's start time.
const pollInterval = 100 * time.Millisecond

// requestTimeout bounds one readiness probe so that a hung connection
// cannot outlast the caller's deadline by much.
const requestTimeout = 2 * time.Second

// poll runs check until it succeeds, p exits, or ctx ends; the error names
// the last failed check and quotes p's log.
func poll(ctx context.Context, p *process, check func(context.Context) error) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if exitErr := p.exited(); exitErr != nil {
			return exitErr
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %v)\n%s", ctx.Err(), err, p.logTail())
		case <-p.done:
		case <-ticker.C:
		}
	}
}

// waitHealthy polls url over plain HTTP until it answers 200 OK.
func waitHealthy(ctx context.Context, p *process, url string) error {
	client := &http.Client{Timeout: requestTimeout}
	return poll(ctx, p, func(ctx context.Context) error {
		return getOK(ctx, client, url)
	})
}

// waitAPIServer polls /readyz as the admin and returns the admin config.
// The CA is re-read on every attempt because kube-apiserver writes its
// self-signed certificate only after it starts, and a read that races the
// write must not be kept.
func waitAPIServer(ctx context.Context, p *process, host string, files apiServerFiles) (*rest.Config, error) {
	var cfg *rest.Config
	err := poll(ctx, p, func(ctx context.Context) error {
		ca, err := os.ReadFile(filepath.Join(files.certDir, "apiserver.crt"))
		if err != nil {
			return err
		}
		cfg = &rest.Config{
			Host:            host,
			BearerToken:     files.adminToken,
			TLSClientConfig: rest.TLSClientConfig{CAData: ca},
			Timeout:         requestTimeout,
		}
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return err
		}
		return getOK(ctx, client, host+"/readyz")
	})
	if err != nil {
		return nil, err
	}
	// Callers' clients set their own deadlines; the probe's must not leak.
	cfg.Timeout = 0
	return cfg, nil
}

// getOK fails unless a GET of url answers 200 OK.
func getOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, logTailBytes))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}
