package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// The last-known-good module.
//
// A module file changed while the CCM runs goes through the rollout guard
// (rollout.go); a restart would skip it, and restarts are routine (drains,
// upgrades, evictions, OOM kills, any other cloud-config change). So the
// leader records in the cluster the module that proved itself in service,
// and a CCM that starts with another module serves the recorded one and
// rolls the configured one out through the same shadow period as a hot
// reload. A configured module that cannot be read, verified or loaded is
// then a rejected update, not a CCM that cannot start.
//
// The record is ConfigMaps in the CCM's namespace: Name holds the digest,
// the signature and which slot holds the module's bytes; Name-a-0.. and
// Name-b-0.. hold the module file, as stored, in chunks below the
// ConfigMap size limit. A new record fills the slot not in use, then
// switches the head ConfigMap, so a record interrupted half-way leaves the
// previous one whole.
//
// A module is recorded when it has served its rollback window without
// being rolled back (at once when rollback is disabled): known good, not
// merely promoted. The bytes are checked against the recorded digest when
// read, and against the configured public key when signatures are
// required: the record can stand in for a signed module only if it is
// signed. The sha256 pin is not applied to it: the pin names the module
// the operator wants next, the record the one that served last.

// Defaults of module.lastKnownGood.
const (
	defaultLastKnownGoodName      = "wasmccm-last-known-good"
	defaultLastKnownGoodNamespace = "kube-system"
	// lastKnownGoodChunkBytes keeps each ConfigMap below the API's 1 MiB
	// limit on a ConfigMap's data; lastKnownGoodChunks chunks hold a
	// standard Go module even uncompressed (about 4 MB; 1.1 MB gzipped)
	// and bound the names the RBAC Role lists.
	lastKnownGoodChunkBytes = 900 << 10
	lastKnownGoodChunks     = 8
)

// LastKnownGoodConfig is module.lastKnownGood.
type LastKnownGoodConfig struct {
	// Disabled turns the record off: every start then serves the configured
	// module unshadowed, as a first install does.
	Disabled bool `json:"disabled,omitempty"`
	// Namespace defaults to the POD_NAMESPACE environment variable, else
	// kube-system; Name to wasmccm-last-known-good.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// ChunkNames lists every ConfigMap the record may use, for RBAC.
func (c LastKnownGoodConfig) ChunkNames() []string {
	name := orDefault(c.Name, defaultLastKnownGoodName)
	names := []string{name}
	for _, slot := range []string{"a", "b"} {
		for i := range lastKnownGoodChunks {
			names = append(names, chunkName(name, slot, i))
		}
	}
	return names
}

func chunkName(name, slot string, i int) string { return fmt.Sprintf("%s-%s-%d", name, slot, i) }

var moduleStarts = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace: "wasmccm", Subsystem: "module", Name: "starts_total",
	Help: "CCM starts by the module served (configured, last_known_good) and why: first_install, recorded (the configured module is the last-known-good), " +
		"shadowing (the configured module differs and is rolled out), configured_unusable, last_known_good_unusable, capabilities_changed.",
	StabilityLevel: metrics.ALPHA,
}, []string{"served", "reason"})

func init() { legacyregistry.MustRegister(moduleStarts) }

// lastKnownGoodStore reads and writes the record.
type lastKnownGoodStore struct {
	client          typedcorev1.ConfigMapsGetter
	namespace, name string
}

func newLastKnownGoodStore(client typedcorev1.ConfigMapsGetter, cfg LastKnownGoodConfig) *lastKnownGoodStore {
	namespace := cfg.Namespace
	if namespace == "" {
		namespace = orDefault(os.Getenv("POD_NAMESPACE"), defaultLastKnownGoodNamespace)
	}
	return &lastKnownGoodStore{client: client, namespace: namespace, name: orDefault(cfg.Name, defaultLastKnownGoodName)}
}

func (s *lastKnownGoodStore) String() string { return s.namespace + "/" + s.name }

// recordedModule is a last-known-good as read back.
type recordedModule struct {
	digest    string
	raw       []byte
	signature []byte
	// source is the module.path or module.image it was served from.
	source     string
	recordedAt string
}

// Keys of the head ConfigMap.
const (
	keySHA256     = "sha256"
	keySlot       = "slot"
	keyChunks     = "chunks"
	keySource     = "source"
	keyRecordedAt = "recordedAt"
	keySignature  = "signature"
	keyModule     = "module"
)

// load returns the record, nil when there is none.
func (s *lastKnownGoodStore) load(ctx context.Context) (*recordedModule, error) {
	head, err := s.client.ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the last-known-good record %s: %w", s, err)
	}
	rec := &recordedModule{digest: head.Data[keySHA256], signature: head.BinaryData[keySignature],
		source: head.Data[keySource], recordedAt: head.Data[keyRecordedAt]}
	chunks, err := strconv.Atoi(head.Data[keyChunks])
	if err != nil || chunks < 1 || chunks > lastKnownGoodChunks {
		return nil, fmt.Errorf("last-known-good record %s: chunk count %q is not 1..%d", s, head.Data[keyChunks], lastKnownGoodChunks)
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
	if got := hex.EncodeToString(sum[:]); got != rec.digest {
		return nil, fmt.Errorf("last-known-good record %s is damaged: its module's sha256 is %s, the record says %s", s, got, rec.digest)
	}
	rec.raw = raw.Bytes()
	return rec, nil
}

// save records file, served from source, as the last-known-good.
func (s *lastKnownGoodStore) save(ctx context.Context, file moduleFile, source string) error {
	if len(file.raw) > lastKnownGoodChunks*lastKnownGoodChunkBytes {
		return fmt.Errorf("module of %d bytes exceeds the record's %d", len(file.raw), lastKnownGoodChunks*lastKnownGoodChunkBytes)
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
	for rest := file.raw; chunks == 0 || len(rest) > 0; chunks++ {
		n := min(len(rest), lastKnownGoodChunkBytes)
		if err := s.put(ctx, chunkName(s.name, slot, chunks), nil, map[string][]byte{keyModule: rest[:n]}); err != nil {
			return err
		}
		rest = rest[n:]
	}
	data := map[string]string{
		keySHA256: file.digest, keySlot: slot, keyChunks: strconv.Itoa(chunks),
		keySource: source, keyRecordedAt: time.Now().UTC().Format(time.RFC3339),
	}
	var binary map[string][]byte
	if len(file.signature) > 0 {
		binary = map[string][]byte{keySignature: file.signature}
	}
	return s.put(ctx, s.name, data, binary)
}

// put creates or replaces one ConfigMap's data.
func (s *lastKnownGoodStore) put(ctx context.Context, name string, data map[string]string, binary map[string][]byte) error {
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

// moduleFile checks the record as the configured module would be checked,
// but for the pin (see the package comment above), and decompresses it.
func (r *recordedModule) moduleFile(cfg ModuleConfig) (moduleFile, error) {
	cfg.SHA256 = ""
	return checkModule(cfg, r.raw, func() ([]byte, error) {
		if len(r.signature) == 0 {
			return nil, errors.New("the last-known-good was recorded without a signature")
		}
		return r.signature, nil
	})
}

// recordLastKnownGood records the module in service once it has served
// its rollback window. The reload goroutine calls it at every poll; a
// failed write is retried at the next poll and reported once.
func (c *Cloud) recordLastKnownGood(ctx context.Context) {
	if c.lastKnownGood == nil || c.served.digest == c.recorded || c.rollout.Load() != nil {
		return
	}
	if rb := c.cfg.Module.Rollout.Rollback; !rb.Disabled && time.Since(c.servedSince) < orDefault(rb.Window.Duration, defaultRollbackWindow) {
		return
	}
	source := c.cfg.Module.Path
	if c.cfg.Module.Image != "" {
		source = c.cfg.Module.Image
	}
	if err := c.lastKnownGood.save(ctx, c.served, source); err != nil {
		if c.recordFailed != c.served.digest {
			c.recordFailed = c.served.digest
			klog.ErrorS(err, "recording the last-known-good module failed; retrying", "record", c.lastKnownGood, "sha256", c.served.digest)
		}
		return
	}
	c.recorded, c.recordFailed = c.served.digest, ""
	klog.InfoS("last-known-good module recorded", "record", c.lastKnownGood, "sha256", c.served.digest, "source", source)
}
