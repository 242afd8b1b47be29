package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// workerPath is the binary a pool starts its workers from: its own, even
// if the file was replaced since it started.
func workerPath() (string, error) { return "/proc/self/exe", nil }

// workerAttr makes a worker die with the thread that started it (Go never
// ends its threads unless a goroutine locked to one exits, which the pool
// never does), so a worker does not outlive a server killed with -9. Its
// stdin reaching EOF is the second way out.
func workerAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// protocolOut moves stdout, the pipe to the pool, to a new descriptor it
// returns, and points descriptor 1 at stderr.
func protocolOut() (*os.File, error) {
	fd, err := syscall.Dup(1)
	if err != nil {
		return nil, fmt.Errorf("dup stdout: %w", err)
	}
	syscall.CloseOnExec(fd)
	if err := syscall.Dup3(2, 1, 0); err != nil {
		return nil, fmt.Errorf("stdout to stderr: %w", err)
	}
	return os.NewFile(uintptr(fd), "sandbox-replies"), nil
}

// threadSlack is room in RLIMIT_AS for the stacks of OS threads the
// runtime may start during a run: with cgo linked in, glibc's 8 MiB each,
// reserved but barely touched (measured: an idle worker has 5 threads, a
// busy one 8). It costs no memory: the RSS watch is the bound on that.
const threadSlack = 8 * 8 << 20

// limitMemory caps the process's address space (RLIMIT_AS) at what it
// spans now plus budget (scaled under -race) plus threadSlack, and returns
// the limit.
//
// RLIMIT_AS, not RLIMIT_DATA: the Go runtime reserves address space
// PROT_NONE and later maps it read-write with MAP_FIXED, and the kernel
// checks RLIMIT_DATA only against the net growth of the mapping, so
// committing a reservation passes it (measured: a 1.6 GB MAP_FIXED over a
// PROT_NONE reservation passed a 200 MiB RLIMIT_DATA; a worker limited by
// it filled [0] * 100000000 past 1.3 GB). RLIMIT_AS counts the
// reservation itself, so a huge allocation fails at once, before a byte of
// it is touched. The limit is measured from the current size because the
// runtime reserves gigabytes at start (heap index, page summaries, and
// under -race the race runtime's shadow). It bounds address space, not
// residency: the part of the first heap arena reserved but not yet used
// at start lies within it, so the pool also watches the worker's RSS.
func limitMemory(budget int64) (int64, error) {
	base, err := procStatus("VmSize")
	if err != nil {
		return 0, err
	}
	limit := base + budget*raceShadow + threadSlack
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: uint64(limit), Max: uint64(limit)}); err != nil {
		return 0, fmt.Errorf("setrlimit RLIMIT_AS %d: %w", limit, err)
	}
	return limit, nil
}

// procStatus reads a size field of /proc/self/status ("VmSize", ...), in
// bytes.
func procStatus(field string) (int64, error) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(field+":")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte("kB")))), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", field, rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// anonRSS is the anonymous resident memory of process pid, in bytes: its
// resident set less the pages it shares with files (the binary's text and
// data, which it shares with the server and every other worker), from
// /proc/<pid>/statm (cheaper to read than status). -1 when it cannot be
// read (the process is gone).
func anonRSS(pid int) int64 {
	var buf [128]byte
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return -1
	}
	n, _ := f.Read(buf[:])
	f.Close()
	fields := bytes.Fields(buf[:n])
	if len(fields) < 3 {
		return -1
	}
	resident, err1 := strconv.ParseInt(string(fields[1]), 10, 64)
	shared, err2 := strconv.ParseInt(string(fields[2]), 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return (resident - shared) * int64(os.Getpagesize())
}

// workerNice is a worker's scheduling niceness: under load the server's
// own goroutines (its HTTP handlers, the pool's memory watch) come before
// scripts.
const workerNice = 10

// lowerPriority renices every thread of the process (Linux applies a
// niceness per thread; threads started later inherit their creator's).
func lowerPriority() {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			syscall.Setpriority(syscall.PRIO_PROCESS, tid, workerNice)
		}
	}
}
