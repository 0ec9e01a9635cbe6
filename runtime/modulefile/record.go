package modulefile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// The last-known-good record is ConfigMaps in one namespace: Name holds
// the digest, the signature, the source and which slot holds the module's
// bytes; Name-a-0.. and Name-b-0.. hold the module file, as stored, in
// chunks below the ConfigMap size limit. A new record fills the slot not
// in use, then switches the head ConfigMap, so a record interrupted
// half-way leaves the previous one whole. Reading checks the bytes
// against the recorded digest.

const (
	// chunkBytes keeps each ConfigMap below the API's 1 MiB limit on a
	// ConfigMap's data; maxChunks chunks hold a standard Go module even
	// uncompressed (about 4 MB; 1.1 MB gzipped) and bound the names the
	// RBAC Role lists.
	chunkBytes = 900 << 10
	maxChunks  = 8
)

// Keys of the head ConfigMap, and of a chunk (keyModule).
const (
	keySHA256     = "sha256"
	keySlot       = "slot"
	keyChunks     = "chunks"
	keySource     = "source"
	keyRecordedAt = "recordedAt"
	keySignature  = "signature"
	keyModule     = "module"
)

// RecordNames lists every ConfigMap a record named name may use, for RBAC.
func RecordNames(name string) []string {
	names := []string{name}
	for _, slot := range []string{"a", "b"} {
		for i := range maxChunks {
			names = append(names, chunkName(name, slot, i))
		}
	}
	return names
}

func chunkName(name, slot string, i int) string { return fmt.Sprintf("%s-%s-%d", name, slot, i) }

// Store reads and writes the record.
type Store struct {
	client          typedcorev1.ConfigMapsGetter
	namespace, name string
}

// NewStore returns the record namespace/name.
func NewStore(client typedcorev1.ConfigMapsGetter, namespace, name string) *Store {
	return &Store{client: client, namespace: namespace, name: name}
}

func (s *Store) String() string { return s.namespace + "/" + s.name }

// Record is a last-known-good module as read back.
type Record struct {
	Digest         string
	Raw, Signature []byte
	// Source is the module path or image reference it was served from.
	Source, RecordedAt string
}

// Load returns the record, nil when there is none.
func (s *Store) Load(ctx context.Context) (*Record, error) {
	head, err := s.client.ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the last-known-good record %s: %w", s, err)
	}
	rec := &Record{Digest: head.Data[keySHA256], Signature: head.BinaryData[keySignature],
		Source: head.Data[keySource], RecordedAt: head.Data[keyRecordedAt]}
	chunks, err := strconv.Atoi(head.Data[keyChunks])
	if err != nil || chunks < 1 || chunks > maxChunks {
		return nil, fmt.Errorf("last-known-good record %s: chunk count %q is not 1..%d", s, head.Data[keyChunks], maxChunks)
	}
	var raw bytes.Buffer
	for i := range chunks {
		name := chunkName(s.name, head.Data[keySlot], i)
		cm, err := s.client.ConfigMaps(s.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading the last-known-good record %s: chunk %s: %w", s, name, err)
		}
		raw.Write(cm.BinaryData[keyModule])
	}
	sum := sha256.Sum256(raw.Bytes())
	if got := hex.EncodeToString(sum[:]); got != rec.Digest {
		return nil, fmt.Errorf("last-known-good record %s is damaged: its module's sha256 is %s, the record says %s", s, got, rec.Digest)
	}
	rec.Raw = raw.Bytes()
	return rec, nil
}

// Save records file, served from source, as the last-known-good.
func (s *Store) Save(ctx context.Context, file File, source string) error {
	if len(file.Raw) > maxChunks*chunkBytes {
		return fmt.Errorf("module of %d bytes exceeds the record's %d", len(file.Raw), maxChunks*chunkBytes)
	}
	head, err := s.client.ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	slot := "a"
	if err == nil && head.Data[keySlot] == "a" {
		slot = "b"
	}
	chunks := 0
	for rest := file.Raw; chunks == 0 || len(rest) > 0; chunks++ {
		n := min(len(rest), chunkBytes)
		if err := s.put(ctx, chunkName(s.name, slot, chunks), nil, map[string][]byte{keyModule: rest[:n]}); err != nil {
			return err
		}
		rest = rest[n:]
	}
	data := map[string]string{
		keySHA256: file.Digest, keySlot: slot, keyChunks: strconv.Itoa(chunks),
		keySource: source, keyRecordedAt: time.Now().UTC().Format(time.RFC3339),
	}
	var binary map[string][]byte
	if len(file.Signature) > 0 {
		binary = map[string][]byte{keySignature: file.Signature}
	}
	return s.put(ctx, s.name, data, binary)
}

// put creates or replaces one ConfigMap's data.
func (s *Store) put(ctx context.Context, name string, data map[string]string, binary map[string][]byte) error {
	configMaps := s.client.ConfigMaps(s.namespace)
	cm, err := configMaps.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "wasm-cloud-controller-manager"}}}
		cm.Data, cm.BinaryData = data, binary
		_, err = configMaps.Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	cm.Data, cm.BinaryData = data, binary
	_, err = configMaps.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// File checks the record as a configured module would be checked, but
// for the pin: the pin names the module the operator wants next, the
// record the one that served last. When trust requires a signature the
// record must carry one, so that it can stand in only for a module the
// key signed.
func (r *Record) File(trust Trust) (File, error) {
	trust.SHA256 = ""
	return Check(r.Raw, trust, func() ([]byte, error) {
		if len(r.Signature) == 0 {
			return nil, errors.New("the last-known-good was recorded without a signature")
		}
		return r.Signature, nil
	})
}
