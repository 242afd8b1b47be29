//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"syscall"
)

// Worker processes need Linux: /proc to measure their memory, and
// Pdeathsig. Elsewhere a worker refuses to start, so Pool.Start fails with
// this error rather than run scripts unmetered.
var errUnsupported = errors.New("sandbox: worker processes need Linux (/proc, Pdeathsig)")

func workerPath() (string, error) { return os.Executable() }

func workerAttr() *syscall.SysProcAttr { return nil }

func protocolOut() (*os.File, error) { return nil, errUnsupported }

func limitMemory(int64) (int64, error) { return 0, errUnsupported }

func anonRSS(int) int64 { return -1 }

func lowerPriority() {}
