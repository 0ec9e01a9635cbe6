//go:build !linux

package ccmproc

import (
	"os"
	"os/exec"
)

var terminate = os.Interrupt

func dieWithParent(*exec.Cmd) {}

// ReadStat and FindAPIServer read /proc, which only Linux has.
func ReadStat(int) Stat { return Stat{} }

func FindAPIServer(string) int { return 0 }

// Mappings is empty: only Linux has /proc/PID/smaps.
func Mappings(int) map[string]int64 { return nil }
