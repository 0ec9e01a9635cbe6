package host

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmccm/wasmccm/modules/sdk/abi"
)

// maxCredentialBytes bounds one credential value.
const maxCredentialBytes = 64 << 10

// credentialStore serves granted credentials from a Secret volume. Files
// are read at every lookup: the kubelet rotates a Secret by swapping a
// symlink, and reading through it is how rotation takes effect with no
// restart and no cache to invalidate. A lookup is a few microseconds, small
// next to the cloud request the credential is for.
type credentialStore struct {
	module  string
	dir     string
	granted map[string]bool
}

func newCredentialStore(module string, cfg CredentialsConfig) (*credentialStore, error) {
	s := &credentialStore{module: module, dir: cfg.Dir, granted: map[string]bool{}}
	for _, name := range cfg.Granted {
		if err := ValidCredentialName(name); err != nil {
			return nil, err
		}
		s.granted[name] = true
	}
	if len(s.granted) > 0 && s.dir == "" {
		return nil, errors.New("credentials are granted but no credentials directory is set")
	}
	return s, nil
}

// ValidCredentialName accepts what a Secret key may be, minus anything that
// could leave the directory or reach the kubelet's dot-files.
func ValidCredentialName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, `/\`) || len(name) > 253 {
		return fmt.Errorf("credential name %q is not a plain Secret key", name)
	}
	return nil
}

func (s *credentialStore) get(name string) ([]byte, abi.Errno) {
	if !s.granted[name] {
		credentialReads.WithLabelValues(s.module, "", "not_granted").Inc()
		return nil, abi.ErrnoNotGranted
	}
	value, err := readBounded(filepath.Join(s.dir, name))
	if err != nil {
		credentialReads.WithLabelValues(s.module, name, "not_found").Inc()
		return nil, abi.ErrnoNotFound
	}
	credentialReads.WithLabelValues(s.module, name, "ok").Inc()
	return value, 0
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fs.ErrNotExist
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCredentialBytes+1))
	if err != nil || len(b) > maxCredentialBytes {
		return nil, fs.ErrInvalid
	}
	return b, nil
}
