package modulefile

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRecordRoundTrip saves modules of several sizes, alternating slots,
// and reads each back whole; a flipped byte in any chunk is reported as
// damage, never served.
func TestRecordRoundTrip(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	store := NewStore(client.CoreV1(), "kube-system", "lkg")
	if rec, err := store.Load(ctx); rec != nil || err != nil {
		t.Fatalf("empty store: %v, %v; want no record", rec, err)
	}
	sizes := []int{1, chunkBytes, chunkBytes + 1, 3*chunkBytes + 17}
	for i, size := range sizes {
		raw := bytes.Repeat([]byte{byte(i + 1)}, size)
		file, err := Check(raw, Trust{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		file.Signature = []byte("sig")
		if err := store.Save(ctx, file, "test"); err != nil {
			t.Fatal(err)
		}
		head, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "lkg", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantSlot, wantChunks := []string{"a", "b"}[i%2], (size+chunkBytes-1)/chunkBytes
		if head.Data[keySlot] != wantSlot || head.Data[keyChunks] != strconv.Itoa(wantChunks) {
			t.Fatalf("size %d: slot %s, %s chunks; want slot %s, %d chunks", size, head.Data[keySlot], head.Data[keyChunks], wantSlot, wantChunks)
		}
		rec, err := store.Load(ctx)
		if err != nil || !bytes.Equal(rec.Raw, raw) || rec.Digest != file.Digest || string(rec.Signature) != "sig" || rec.Source != "test" {
			t.Fatalf("size %d: read back %v (%d bytes); want the saved module", size, err, len(rec.Raw))
		}
	}
	last, _ := client.CoreV1().ConfigMaps("kube-system").Get(ctx, chunkName("lkg", "b", 3), metav1.GetOptions{})
	last.BinaryData[keyModule][0] ^= 0xff
	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(ctx, last, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if rec, err := store.Load(ctx); rec != nil || err == nil || !strings.Contains(err.Error(), "is damaged") {
		t.Fatalf("damaged chunk: %v, %v; want an error saying so", rec, err)
	}
}

// TestRecordFile: the record skips the pin but not the signature.
func TestRecordFile(t *testing.T) {
	rec := &Record{Raw: []byte("\x00asm\x01\x00\x00\x00")}
	if _, err := rec.File(Trust{SHA256: strings.Repeat("0", 64)}); err != nil {
		t.Fatalf("pinned to another module: %v; the pin names the next module, not the record", err)
	}
	if _, err := rec.File(Trust{PublicKeyPath: "/nonexistent", SignaturePath: "x"}); err == nil {
		t.Fatal("an unsigned record passed while signatures are required")
	}
}

// TestRecordNames: every ConfigMap a record may use is named, for RBAC.
func TestRecordNames(t *testing.T) {
	names := RecordNames("lkg")
	if len(names) != 1+2*maxChunks || names[0] != "lkg" || names[len(names)-1] != chunkName("lkg", "b", maxChunks-1) {
		t.Fatalf("RecordNames = %v", names)
	}
}
