package e2etest

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
)

// CleanEnv is this process's environment without the settings a
// turngate process reads (DATABASE_URL, TURNGATE_*): each test sets its
// own.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "TURNGATE_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// WaitForAddress reads the server's stdout until it prints its address.
func WaitForAddress(t *testing.T, stdout interface{ Read([]byte) (int, error) }) string {
	t.Helper()
	base, err := ReadAddress(stdout)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// ReadAddress is WaitForAddress for goroutines other than the test's.
func ReadAddress(stdout interface{ Read([]byte) (int, error) }) (string, error) {
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "turngate is serving the chat at "); ok {
				base, _, _ := strings.Cut(rest, " ")
				found <- strings.TrimSuffix(base, "/")
			}
		}
	}()
	select {
	case base := <-found:
		return base, nil
	case <-time.After(90 * time.Second):
		return "", errors.New("turngate did not print its address")
	}
}

// PostmasterPid is the pid of the private Postgres a turngate process
// started in dataDir.
func PostmasterPid(t *testing.T, dataDir string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, "postgres", "pgdata", "postmaster.pid"))
	if err != nil {
		t.Fatalf("reading postmaster.pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// Alive reports whether pid is a running (not zombie) process.
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat))
	return len(fields) > 2 && fields[2] != "Z"
}

// PrefixWriter takes a process's stderr: under -v it logs each line with
// prefix; whatever the verbosity, it fails the test when the race
// detector of a race-built process reports a data race.
type PrefixWriter struct {
	t      testing.TB
	prefix string

	mu    sync.Mutex
	raced bool
}

// NewPrefixWriter logs a process's output to t with prefix.
func NewPrefixWriter(t testing.TB, prefix string) *PrefixWriter {
	return &PrefixWriter{t: t, prefix: prefix}
}

func (w *PrefixWriter) Write(p []byte) (int, error) {
	if testing.Verbose() {
		w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	}
	if bytes.Contains(p, []byte("WARNING: DATA RACE")) {
		w.mu.Lock()
		first := !w.raced
		w.raced = true
		w.mu.Unlock()
		if first {
			w.t.Errorf("%sthe race detector reported a data race (run with -v for the process's output)", w.prefix)
		}
	}
	return len(p), nil
}

// World is what real turngate processes of one test share: a
// private database, a data folder (the dev key the test mints envelopes
// with) and a handle on the database for the test's own reads.
type World struct {
	Bin, DBURL, DataDir string
	DB                  *sql.DB
}

// NewWorld makes a test's database and data folder (named with
// prefix), both removed at cleanup.
func NewWorld(t testing.TB, bin, prefix string) *World {
	t.Helper()
	w := &World{Bin: bin, DBURL: dbtest.NewDB(t)}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w.DataDir = dir
	if w.DB, err = sql.Open("postgres", w.DBURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.DB.Close() })
	return w
}

// Start starts a replica named name on the world's database and folder.
func (w *World) Start(t testing.TB, name string, env ...string) *Replica {
	t.Helper()
	return StartReplica(t, w.Bin, name, w.DBURL, w.DataDir, env...)
}

// Client is a GraphQL client for email on the replica at base.
func (w *World) Client(t *testing.T, base, email string) *gqlclient.Client {
	t.Helper()
	return ClientFor(t, w.Bin, base, w.DataDir, email)
}

// Replica is one real turngate process against a shared database.
type Replica struct {
	stopOnce sync.Once
	Name     string
	Cmd      *exec.Cmd
	// Base is its address, http://127.0.0.1:port.
	Base string
	out  io.Closer
}

// StartReplica starts `turngate serve` on a free loopback port against
// dbURL with dataDir (the demo seeded, env added to a clean environment)
// and waits until it prints its address. It is stopped at cleanup.
func StartReplica(t testing.TB, bin, name, dbURL, dataDir string, env ...string) *Replica {
	t.Helper()
	r, err := TryStartReplica(t, bin, name, dbURL, dataDir, env...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TryStartReplica starts a replica and waits for its address; it may run
// on a goroutine other than the test's (the chaos monkey restarts them).
func TryStartReplica(t testing.TB, bin, name, dbURL, dataDir string, env ...string) (*Replica, error) {
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Env = append(CleanEnv(), append([]string{
		"DATABASE_URL=" + dbURL, "TURNGATE_DATA=" + dataDir, "TURNGATE_REPLICA=" + name,
		"TURNGATE_DEMO=true",
		// Most tests never run a script: their run_code workers start
		// when one does (env may say otherwise).
		"TURNGATE_SANDBOX_LAZY=true",
	}, env...)...)
	r, w := io.Pipe()
	cmd.Stdout = w
	cmd.Stderr = NewPrefixWriter(t, name+": ")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	rep := &Replica{Name: name, Cmd: cmd, out: w}
	t.Cleanup(func() {
		rep.Stop()
		w.Close()
	})
	base, err := ReadAddress(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rep.Base = base
	return rep, nil
}

// Kill9 kills the replica with SIGKILL and reaps it. Safe on any goroutine.
func (r *Replica) Kill9(t testing.TB) {
	if err := r.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("kill -9 %s: %v", r.Name, err)
	}
	r.Stop()
}

// Stop kills the replica if it still runs and reaps it; safe to call twice.
func (r *Replica) Stop() {
	r.stopOnce.Do(func() {
		r.Cmd.Process.Kill()
		r.Cmd.Wait()
	})
}

// ClientFor is a GraphQL client on base carrying email's envelope, minted
// by `turngate token` from the replicas' shared data folder.
func ClientFor(t *testing.T, bin, base, dataDir, email string) *gqlclient.Client {
	t.Helper()
	tok, err := TokenFor(bin, dataDir, email)
	if err != nil {
		t.Fatal(err)
	}
	return &gqlclient.Client{URL: base + "/graphql", Header: http.Header{"X-Turngate-Identity": {tok}}, HTTP: servertest.HTTPClient}
}

// TokenFor mints email's dev envelope with `turngate token` from dataDir.
// The plain binary mints it when make test names one: minting reads a key
// and signs, and a race-built process costs ten times as much to start.
func TokenFor(bin, dataDir, email string) (string, error) {
	if p := os.Getenv(EnvPlainBinary); p != "" {
		bin = p
	}
	cmd := exec.Command(bin, "token", "--email", email)
	cmd.Env = append(CleanEnv(), "TURNGATE_DATA="+dataDir)
	tok, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("turngate token: %w", err)
	}
	return strings.TrimSpace(string(tok)), nil
}

// ProcessRSS is the VmRSS of pid, in bytes (0 once it is gone).
func ProcessRSS(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// SettledRSS polls a process's RSS until three samples 100ms apart lie
// within 1 MiB of each other and returns the last; after five seconds (or
// at ctx's end) it returns the last sample as it is, an upper bound while
// the runtime is still handing memory back.
func SettledRSS(ctx context.Context, pid int) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last []int64
	for {
		last = append(last, ProcessRSS(pid))
		if k := len(last); k >= 3 && max(last[k-1], last[k-2], last[k-3])-min(last[k-1], last[k-2], last[k-3]) < 1<<20 {
			return last[k-1]
		}
		select {
		case <-ctx.Done():
			return last[len(last)-1]
		case <-tick.C:
		}
	}
}

func Mib(n int64) float64 { return float64(n) / (1 << 20) }
