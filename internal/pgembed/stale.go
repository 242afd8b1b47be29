package pgembed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopStale implements the orphan guard: if pgdata/postmaster.pid names a
// live postgres serving pgdata, stop it; if it names a live process that is
// something else (a reused PID), remove the stale file so that postgres does
// not refuse to start.
func stopStale(pgdata string, logf func(string, ...any)) error {
	pidFile := filepath.Join(pgdata, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 || !processAlive(pid) {
		return nil // postgres itself handles a lock file naming a dead process
	}
	if !isPostmasterOf(pid, pgdata) {
		logf("pgembed: removing stale %s (pid %d is not a postgres serving it)", pidFile, pid)
		if err := os.Remove(pidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pgembed: %w", err)
		}
		return nil
	}
	logf("pgembed: stopping orphaned postgres (pid %d) left by a previous run in %s", pid, pgdata)
	_ = syscall.Kill(pid, syscall.SIGQUIT) // immediate shutdown; it also stops its children
	if waitGone(pid, quitTimeout) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(pid, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("pgembed: orphaned postgres (pid %d) serving %s does not exit", pid, pgdata)
}

// waitGone polls until process pid no longer runs or d passes. The process
// is not our child, so it cannot be waited for.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for processAlive(pid) {
		select {
		case <-deadline.C:
			return !processAlive(pid)
		case <-tick.C:
		}
	}
	return true
}
