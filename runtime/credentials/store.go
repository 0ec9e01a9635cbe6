package credentials

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wasmccm/wasmccm/abi"
)

// maxCredentialBytes bounds one credential value, MaxNameBytes its name,
// as Kubernetes bounds a Secret key.
const (
	maxCredentialBytes = 64 << 10
	MaxNameBytes       = 253
)

// Store serves the module's secrets from a Secret volume: to the
// Authenticator, which applies them to requests, and raw to the module
// only for readable names. The kubelet rotates a Secret by writing new
// files and swapping a symlink, so a lookup stats the path, which follows
// the symlink, and re-reads the file only when what it finds is not the
// file it read last time (another file, or another size or modification
// time): rotation takes effect at the next lookup, with no restart, for
// one stat instead of open, stat, read and close on every request. The
// cache holds one entry per key the operator's configuration names.
type Store struct {
	dir      string
	readable map[string]bool
	// secret are the keys that hold the credentials' secrets: each value
	// read is known to the search of every response (known) from the
	// store's making and at each rotation.
	secret map[string]bool

	mu    sync.Mutex
	cache map[string]cachedCredential
	// reads counts file reads, which tests compare with lookups.
	reads int
	// readRaw records the readable names the module read, for wasmccm test.
	readRaw map[string]bool
}

type cachedCredential struct {
	file  fs.FileInfo
	value []byte
}

// NewStore returns the store of cfg's secrets.
func NewStore(cfg Config) (*Store, error) {
	s := &Store{dir: cfg.Dir, readable: map[string]bool{}, secret: map[string]bool{},
		cache: map[string]cachedCredential{}, readRaw: map[string]bool{}}
	for _, name := range cfg.Readable {
		if err := ValidName(name); err != nil {
			return nil, err
		}
		s.readable[name] = true
	}
	if (len(s.readable) > 0 || len(cfg.Auth) > 0) && s.dir == "" {
		return nil, errors.New("credentials are configured but no credentials directory is set")
	}
	for i := range cfg.Auth {
		if _, sc, _ := cfg.Auth[i].scheme(); sc != nil {
			for _, key := range sc.secretKeys() {
				if ValidName(key) == nil {
					s.secret[key] = true
				}
			}
		}
	}
	// Read now, before any module runs: another process, or a module
	// generation before this one, may have sent them already. A key
	// missing or unreadable now fails the request that needs it.
	for key := range s.secret {
		s.read(key)
	}
	return s, nil
}

// ValidName accepts what a Secret key may be, minus anything that
// could leave the directory or reach the kubelet's dot-files.
func ValidName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, `/\`) || len(name) > MaxNameBytes {
		return fmt.Errorf("credential name %q is not a plain Secret key", name)
	}
	return nil
}

// ReadRaw serves the credential import: a raw read, refused unless the
// operator made name readable.
func (s *Store) ReadRaw(name string) ([]byte, abi.Errno) {
	if !s.readable[name] {
		return nil, abi.ErrnoNotGranted
	}
	value, err := s.read(name)
	if err != nil {
		return nil, abi.ErrnoNotFound
	}
	s.mu.Lock()
	s.readRaw[name] = true
	s.mu.Unlock()
	return value, 0
}

// RawReads lists, sorted, the names read with ReadRaw: each is a secret
// the module held.
func (s *Store) RawReads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.readRaw))
}

// read returns the credential's value, from the cache while the file is
// the one read last. The stat comes before the read: if the file changes
// in between, the value cached is newer than its stat, and the next lookup
// reads again.
func (s *Store) read(name string) ([]byte, error) {
	path := filepath.Join(s.dir, name)
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.cache[name]; ok && os.SameFile(c.file, st) && c.file.Size() == st.Size() && c.file.ModTime().Equal(st.ModTime()) {
		return c.value, nil
	}
	delete(s.cache, name)
	s.reads++
	value, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	s.cache[name] = cachedCredential{file: st, value: value}
	if s.secret[name] {
		// As the schemes send it (applying.secret).
		known.add(time.Time{}, string(bytes.TrimSpace(value)))
	}
	return value, nil
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
