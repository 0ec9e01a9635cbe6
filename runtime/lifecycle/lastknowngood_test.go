package lifecycle

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/lifecycletest"
	"github.com/wasmccm/wasmccm/internal/wasmtest"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

// recordIn is the last-known-good record in client, where the CCM keeps
// it by default.
func recordIn(client *fake.Clientset) *modulefile.Store {
	return modulefile.NewStore(client.CoreV1(), "kube-system", "wasmccm-last-known-good")
}

// startWith starts a Manager as the CCM does, over the record in client,
// with configured as the module file and one instance per module.
func startWith(t *testing.T, client *fake.Clientset, configured []byte, mutate func(*testModule)) (*Manager, *testModule, error) {
	t.Helper()
	_, grants := lifecycletest.Simcloud(t)
	tm := newTestModule(t, configured, grants)
	tm.host.PoolSize = 1
	tm.opts.Record = recordIn(client)
	if mutate != nil {
		mutate(tm)
	}
	m, err := tm.start(t)
	return m, tm, err
}

// saveRecord stores wasm as the last-known-good in client.
func saveRecord(t *testing.T, client *fake.Clientset, wasm []byte) string {
	t.Helper()
	file, err := modulefile.Check(wasm, modulefile.Trust{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := recordIn(client).Save(context.Background(), file, "test"); err != nil {
		t.Fatal(err)
	}
	return file.Digest
}

// damage flips a byte of every recorded chunk.
func damage(t *testing.T, client *fake.Clientset) {
	t.Helper()
	ctx := context.Background()
	configMaps := client.CoreV1().ConfigMaps("kube-system")
	list, err := configMaps.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if chunk := cm.BinaryData["module"]; len(chunk) > 100 {
			chunk[100] ^= 0xff
			if _, err := configMaps.Update(ctx, &cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestStartWithLastKnownGood covers each start: which module serves,
// which is rolled out, and what is reported.
func TestStartWithLastKnownGood(t *testing.T) {
	good, goodDigest := lifecycletest.SimcloudModule(t, "simcloud")
	allGone, allGoneDigest := lifecycletest.SimcloudModule(t, "allgone")
	corrupt := []byte("\x00asm but not really a module")
	// A module whose init never returns: loading it gives up after the
	// call timeout, whatever context the start has.
	method := []byte{wasmtest.I32, wasmtest.I32}
	initHangs := wasmtest.Module{MemoryPages: 1, Funcs: []wasmtest.Func{
		{Export: abi.ExportABIVersion, Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(abi.Version)},
		{Export: abi.ExportAlloc, Params: []byte{wasmtest.I32}, Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(1024)},
		{Export: abi.ExportInit, Params: method, Results: []byte{wasmtest.I64}, Body: wasmtest.Seq(wasmtest.LoopForever, wasmtest.I64Const(0))},
	}}.Bytes()
	tests := []struct {
		name                   string
		recorded               []byte
		damaged                bool
		configured             []byte
		wantServed, wantShadow string
		wantRecorded           string
		wantEvent, wantErr     string
	}{
		{name: "first install", configured: good, wantServed: goodDigest},
		{name: "configured is the record", recorded: good, configured: good, wantServed: goodDigest, wantRecorded: goodDigest},
		{name: "configured differs: shadowed against the record", recorded: good, configured: allGone,
			wantServed: goodDigest, wantShadow: allGoneDigest, wantRecorded: goodDigest},
		{name: "configured corrupt: the record serves", recorded: good, configured: corrupt,
			wantServed: goodDigest, wantRecorded: goodDigest, wantEvent: "configured module rejected at start, last-known-good " + goodDigest},
		{name: "configured init hangs: the record serves", recorded: good, configured: initHangs,
			wantServed: goodDigest, wantRecorded: goodDigest, wantEvent: "wasmccm_init: module call failed (timeout): ran past the 2s call timeout"},
		{name: "record damaged: configured serves unshadowed", recorded: good, damaged: true, configured: allGone,
			wantServed: allGoneDigest, wantEvent: "serves without a shadow period: the last-known-good record could not be read: last-known-good record kube-system/wasmccm-last-known-good is damaged"},
		{name: "neither can serve", recorded: good, damaged: true, configured: corrupt, wantErr: "is damaged"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tt.recorded != nil {
				saveRecord(t, client, tt.recorded)
			}
			if tt.damaged {
				damage(t, client)
			}
			m, tm, err := startWith(t, client, tt.configured, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "invalid version header") {
					t.Fatalf("err = %v, want one naming both problems (%q and the configured module's)", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.served.Digest != tt.wantServed || m.candidate() != tt.wantShadow || m.recorded != tt.wantRecorded {
				t.Fatalf("served %.12s, in shadow %.12s, recorded %.12s; want %.12s, %.12s, %.12s",
					m.served.Digest, m.candidate(), m.recorded, tt.wantServed, tt.wantShadow, tt.wantRecorded)
			}
			starts := tm.events.messages(events.ModuleStart)
			if tt.wantEvent == "" && len(starts) > 0 || tt.wantEvent != "" && (len(starts) != 1 || !strings.Contains(starts[0], tt.wantEvent)) {
				t.Fatalf("ModuleStart Events %q, want %q", starts, tt.wantEvent)
			}
		})
	}
}

// TestLastKnownGoodRequiresSignature: with signatures required, an
// unsigned record cannot stand in for the configured module.
func TestLastKnownGoodRequiresSignature(t *testing.T) {
	good, _ := lifecycletest.SimcloudModule(t, "simcloud")
	allGone, allGoneDigest := lifecycletest.SimcloudModule(t, "allgone")
	client := fake.NewClientset()
	saveRecord(t, client, good)
	key, sign := lifecycletest.Signer(t)
	m, tm, err := startWith(t, client, allGone, func(tm *testModule) {
		dir := t.TempDir()
		tm.opts.Trust = modulefile.Trust{PublicKeyPath: filepath.Join(dir, "key.pub"), SignaturePath: filepath.Join(dir, "module.sig")}
		lifecycletest.WriteFile(t, tm.opts.Trust.PublicKeyPath, key)
		lifecycletest.WriteFile(t, tm.opts.Trust.SignaturePath, sign(allGone))
	})
	if err != nil {
		t.Fatal(err)
	}
	if starts := tm.events.messages(events.ModuleStart); m.served.Digest != allGoneDigest || len(starts) == 0 || !strings.Contains(starts[0], "recorded without a signature") {
		t.Fatalf("served %.12s, Events %v; want the signed configured module, the unsigned record refused", m.served.Digest, starts)
	}
}

// TestRecordLastKnownGood: the module in service is recorded once it has
// served its rollback window, and reads back whole, although the Manager
// let go of the decompressed module once it was compiled.
func TestRecordLastKnownGood(t *testing.T) {
	good, goodDigest := lifecycletest.SimcloudModule(t, "simcloud")
	client := fake.NewClientset()
	m, _, err := startWith(t, client, good, func(tm *testModule) { tm.opts.Rollout.Rollback.Window.Duration = time.Hour })
	if err != nil {
		t.Fatal(err)
	}
	if m.served.Wasm != nil {
		t.Fatalf("the Manager keeps the decompressed module in service (%d bytes)", len(m.served.Wasm))
	}
	ctx := context.Background()
	m.recordLastKnownGood(ctx)
	if rec, err := m.opts.Record.Load(ctx); err != nil || rec != nil {
		t.Fatalf("record %v, %v before the rollback window passed; want none", rec, err)
	}
	m.servedSince = time.Now().Add(-time.Hour)
	m.recordLastKnownGood(ctx)
	rec, err := m.opts.Record.Load(ctx)
	if err != nil || rec == nil || rec.Digest != goodDigest || !bytes.Equal(rec.Raw, good) || m.recorded != goodDigest {
		t.Fatalf("record %v, %v; want %s", rec, err, goodDigest)
	}
}
