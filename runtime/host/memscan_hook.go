//go:build wasmccm_memscan

package host

import (
	"encoding/json"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/klog/v2"
)

// A CCM built with the wasmccm_memscan tag, for test/e2e only, searches
// its module instances' memory on SIGUSR1 for the bytes of the file
// $WASMCCM_MEMSCAN_DIR/needle, and writes what it found (a memoryScan) to
// $WASMCCM_MEMSCAN_DIR/result.json.
func init() {
	liveInstances = &instanceSet{m: map[*instance]struct{}{}}
	dir := os.Getenv("WASMCCM_MEMSCAN_DIR")
	if dir == "" {
		return
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGUSR1)
	go func() {
		for range signals {
			if err := writeMemoryScan(dir); err != nil {
				klog.ErrorS(err, "memory scan")
			}
		}
	}()
}

func writeMemoryScan(dir string) error {
	needle, err := os.ReadFile(filepath.Join(dir, "needle"))
	if err != nil {
		return err
	}
	b, _ := json.Marshal(scanInstances(needle))
	tmp := filepath.Join(dir, "result.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "result.json"))
}
