package credentials

import (
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/credentials/credentialstest"
)

// TestStoreFollowsRotation: a Secret the kubelet rotates is read anew at
// the next lookup, once, then served from the cache while it stays.
func TestStoreFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(Config{Dir: dir, Readable: []string{"token"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{"first", "second"} {
		credentialstest.RotateSecret(t, dir, "token", value)
		before := s.reads
		for range 3 {
			if got, e := s.ReadRaw("token"); e != 0 || string(got) != value {
				t.Fatalf("after rotating to %q: %q, errno %d", value, got, e)
			}
		}
		if n := s.reads - before; n != 1 {
			t.Errorf("after rotating to %q: the file was read %d times for 3 lookups, want 1", value, n)
		}
	}
	if got := s.RawReads(); len(got) != 1 || got[0] != "token" {
		t.Errorf("RawReads %q, want [token]", got)
	}
}

// TestStoreReadable: only the names the operator made readable are
// served raw, and a readable name without a file is not found.
func TestStoreReadable(t *testing.T) {
	dir := credentialstest.SecretDir(t, map[string]string{"token": "s3cret", "readable": "ok"})
	s, err := NewStore(Config{Dir: dir, Readable: []string{"readable", "absent"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want abi.Errno
	}{{"readable", 0}, {"token", abi.ErrnoNotGranted}, {"absent", abi.ErrnoNotFound}, {"../token", abi.ErrnoNotGranted}} {
		if _, e := s.ReadRaw(c.name); e != c.want {
			t.Errorf("%s: errno %d, want %d", c.name, e, c.want)
		}
	}
	if _, err := NewStore(Config{Readable: []string{"token"}}); err == nil {
		t.Error("readable names without a directory are accepted")
	}
	if _, err := NewStore(Config{Dir: dir, Readable: []string{"../token"}}); err == nil {
		t.Error("a name that leaves the directory is accepted")
	}
}
