package pgembed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ownerLockFile, in Options.Dir, is held (flock, exclusive) by the process
// that owns the folder's server for as long as the server runs; the
// kernel releases it when that process exits, kill -9 included. Only the
// holder may start, stop or reclaim the folder's postmaster.
const ownerLockFile = "owner.lock"

// ErrFolderInUse: another live process owns the data folder's server.
var ErrFolderInUse = errors.New("data folder in use")

// lockOwner takes the folder's owner lock without waiting and records this
// process's id in it. When another live process holds it, the error names
// that process and what to do instead; nothing of its server is touched.
func lockOwner(dir string) (*os.File, error) {
	path := filepath.Join(dir, ownerLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) // close-on-exec: postgres does not inherit it
	if err != nil {
		return nil, fmt.Errorf("pgembed: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(b))
			if _, perr := strconv.Atoi(holder); perr != nil {
				holder = "unknown"
			}
			return nil, fmt.Errorf("pgembed: %w: %s is in use by process %s, which runs its PostgreSQL; "+
				"stop that process, or give this one another data folder (TURNGATE_DATA) or a database (DATABASE_URL)",
				ErrFolderInUse, dir, holder)
		}
		return nil, fmt.Errorf("pgembed: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
