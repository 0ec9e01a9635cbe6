package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// HelmVersion is the Helm that hack/install-helm.sh caches by default.
const HelmVersion = "v3.22.0"

// Helm runs the cached helm with args, without user configuration or
// repositories, and returns its standard output; an error carries its
// standard error. Without helm it skips t, or fails it under WASMCCM_E2E
// (make test installs it first).
func Helm(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	path := filepath.Join(cacheRoot(), "bin", "helm-"+HelmVersion)
	if _, err := os.Stat(path); err != nil {
		skipOrFail(t, fmt.Errorf("no helm (hack/install-helm.sh installs it): %w", err))
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
