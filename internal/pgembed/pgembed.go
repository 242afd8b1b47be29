package pgembed

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/lib/pq" // driver for the readiness check
)

// ErrNoBinaries is returned by [Start] when no PostgreSQL binaries are found.
var ErrNoBinaries = errors.New("PostgreSQL binaries not found: install them with `apt-get install -y postgresql` (or set TURNGATE_PG_BIN)")

// Options configures [Start].
type Options struct {
	// Dir is the parent of the data folder: the cluster lives in Dir/pgdata
	// and the server log in Dir/postgres.log. It is created if missing and
	// kept between runs (initdb runs only when Dir/pgdata holds no cluster).
	Dir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
	// Durable keeps PostgreSQL's crash-safe defaults. When false (tests
	// only), fsync, synchronous_commit and full_page_writes are turned off.
	Durable bool
	// MaxConnections sets max_connections; 0 keeps PostgreSQL's default
	// (100). A process that runs several connection pools against one
	// server (a benchmark with its measuring pool beside the app's) sets
	// it above their sum.
	MaxConnections int
	// Logf, if set, receives progress messages (initdb, start, stop).
	Logf func(format string, args ...any)
}

// Postgres is a running server started by [Start].
type Postgres struct {
	pgdata, logPath string
	port            int
	logf            func(string, ...any)

	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error         // cmd.Wait's result, valid once done is closed

	stopOnce sync.Once
	stopErr  error

	// owner holds the folder's owner lock until Stop (lock.go).
	owner *os.File
}

const (
	readyTimeout = 60 * time.Second // default bound on startup when ctx has no earlier deadline
	stopTimeout  = 30 * time.Second // SIGINT (fast shutdown) → SIGQUIT
	quitTimeout  = 10 * time.Second // SIGQUIT (immediate shutdown) → SIGKILL
	pollInterval = 20 * time.Millisecond
	logTailLines = 20
)

// errPortInUse marks a startup failure caused by the port being taken.
var errPortInUse = errors.New("port in use")

// Start starts (and, if needed, initializes) a private PostgreSQL server as
// described in the package documentation. ctx bounds the startup only.
func Start(ctx context.Context, opts Options) (_ *Postgres, err error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if opts.Dir == "" {
		return nil, errors.New("pgembed: Options.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgembed: %w", err)
	}
	pgdata := filepath.Join(dir, "pgdata")
	bin, err := findBinDir(pgdata)
	if err != nil {
		return nil, err
	}
	ra, err := currentRunAs()
	if err != nil {
		return nil, err
	}
	if err := prepareDirs(dir, pgdata, ra); err != nil {
		return nil, err
	}
	// Only the folder's owner may touch its postmaster: a second process
	// on the same folder stops here, before the orphan guard.
	owner, err := lockOwner(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			owner.Close() // releases the lock
		}
	}()
	logPath := filepath.Join(dir, "postgres.log")
	if err := stopStale(pgdata, logf); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(pgdata, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := initdb(ctx, bin, dir, pgdata, logPath, opts.Durable, ra, logf); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("pgembed: %w", err)
	}

	attempts := 1
	if opts.Port == 0 {
		attempts = 3 // the free port we picked may be taken before postgres binds it
	}
	for i := 1; ; i++ {
		port := opts.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		p, err := launch(ctx, bin, dir, pgdata, logPath, port, opts, ra, logf)
		if err == nil {
			p.owner = owner
			return p, nil
		}
		if i >= attempts || !errors.Is(err, errPortInUse) {
			return nil, err
		}
		logf("pgembed: port %d was taken, retrying with another one", port)
	}
}

func launch(ctx context.Context, bin, dir, pgdata, logPath string, port int, opts Options, ra *runAs, logf func(string, ...any)) (*Postgres, error) {
	logFile, offset, err := openLog(logPath, ra)
	if err != nil {
		return nil, err
	}
	args := []string{
		"-D", pgdata,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
	}
	if opts.MaxConnections > 0 {
		args = append(args, "-c", "max_connections="+strconv.Itoa(opts.MaxConnections))
	}
	if !opts.Durable {
		args = append(args,
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			// A test suite's databases live for seconds: no WAL beyond
			// crash recovery (CREATE DATABASE and new tables skip it), no
			// autovacuum workers visiting hundreds of them, no JIT
			// compiling a test's one expensive query.
			"-c", "wal_level=minimal",
			"-c", "max_wal_senders=0",
			"-c", "autovacuum=off",
			"-c", "jit=off",
		)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir = dir
	cmd.Env = childEnv(dir)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr(ra)
	err = cmd.Start()
	logFile.Close() // the child has its own descriptor
	if err != nil {
		return nil, fmt.Errorf("pgembed: starting postgres: %w", err)
	}
	p := &Postgres{
		pgdata: pgdata, logPath: logPath, port: port, logf: logf,
		cmd: cmd, done: make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := p.waitReady(ctx); err != nil {
		p.kill()
		tail := logTail(logPath, offset)
		if strings.Contains(tail, "could not bind") || strings.Contains(tail, "already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return nil, fmt.Errorf("pgembed: starting postgres on port %d: %w; last lines of %s:\n%s", port, err, logPath, tail)
	}
	logf("pgembed: postgres (pid %d) ready on 127.0.0.1:%d, data in %s", cmd.Process.Pid, port, pgdata)
	return p, nil
}

// waitReady polls a real connection until the server answers a query, the
// process exits, or the deadline passes.
func (p *Postgres) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	db, err := sql.Open("postgres", p.URL("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var lastErr error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("postgres exited during startup (%v)", p.waitErr)
		default:
		}
		attempt, cancelAttempt := context.WithTimeout(ctx, 5*time.Second)
		// data_directory identifies our server: if the port was taken by
		// another PostgreSQL, we must not mistake it for ours.
		var dataDir string
		err := db.QueryRowContext(attempt, "SELECT current_setting('data_directory')").Scan(&dataDir)
		cancelAttempt()
		switch {
		case err != nil:
			lastErr = err
		case sameDir(dataDir, p.pgdata):
			return nil
		default:
			lastErr = fmt.Errorf("%w: another server (data in %s) answers there", errPortInUse, dataDir)
		}
		select {
		case <-p.done:
			return fmt.Errorf("postgres exited during startup (%v)", p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready: %w (last error: %v)", ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}

// URL returns the connection URL of database dbname for the superuser
// "postgres", e.g. postgres://postgres@127.0.0.1:5432/app?sslmode=disable.
func (p *Postgres) URL(dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port returns the TCP port the server listens on (on 127.0.0.1).
func (p *Postgres) Port() int { return p.port }

// Stop shuts the server down: SIGINT (fast shutdown: disconnects clients,
// writes a checkpoint), then SIGQUIT after 30 s and SIGKILL 10 s later. It
// returns once the process has exited. Further calls return the first call's
// result. The error is non-nil if the server had already exited on its own
// or had to be killed.
func (p *Postgres) Stop() error {
	p.stopOnce.Do(func() {
		p.stopErr = p.stop()
		if p.owner != nil {
			p.owner.Close() // the folder is free for its next owner
		}
	})
	return p.stopErr
}

func (p *Postgres) stop() error {
	select {
	case <-p.done:
		if p.waitErr != nil {
			return fmt.Errorf("pgembed: postgres had already exited: %w (see %s)", p.waitErr, p.logPath)
		}
		return nil
	default:
	}
	pid := p.cmd.Process.Pid
	p.logf("pgembed: stopping postgres (pid %d)", pid)
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if p.waitExit(stopTimeout) {
		return nil
	}
	p.logf("pgembed: postgres (pid %d) still running after %v, sending SIGQUIT", pid, stopTimeout)
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	if p.waitExit(quitTimeout) {
		return fmt.Errorf("pgembed: postgres did not stop within %v of SIGINT; stopped it with SIGQUIT", stopTimeout)
	}
	p.kill()
	return fmt.Errorf("pgembed: postgres ignored SIGINT and SIGQUIT; killed it")
}

// kill stops the process immediately (SIGQUIT, then SIGKILL) and waits for it.
func (p *Postgres) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	if !p.waitExit(quitTimeout) {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *Postgres) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

func initdb(ctx context.Context, bin, dir, pgdata, logPath string, durable bool, ra *runAs, logf func(string, ...any)) error {
	logf("pgembed: initializing a new cluster in %s", pgdata)
	logFile, offset, err := openLog(logPath, ra)
	if err != nil {
		return err
	}
	defer logFile.Close()
	args := []string{"-D", pgdata, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C"}
	if !durable {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), args...)
	cmd.Dir = dir
	cmd.Env = childEnv(dir)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr(ra)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgembed: initdb: %w; last lines of %s:\n%s", err, logPath, logTail(logPath, offset))
	}
	return nil
}

// openLog opens the log file for appending and returns its current size,
// where this run's output begins.
func openLog(path string, ra *runAs) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, 0, fmt.Errorf("pgembed: %w", err)
	}
	if err := ra.chown(path); err != nil {
		f.Close()
		return nil, 0, err
	}
	off, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("pgembed: %w", err)
	}
	return f, off, nil
}

// logTail returns the last lines written to the log file after offset.
func logTail(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	const maxBytes = 16 << 10
	if fi, err := f.Stat(); err == nil && fi.Size()-offset > maxBytes {
		offset = fi.Size() - maxBytes
	}
	b, err := io.ReadAll(io.NewSectionReader(f, offset, maxBytes))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "(empty)"
	}
	return strings.Join(lines, "\n")
}

// childEnv is the environment of initdb and postgres: ours without PG*
// variables (which could redirect them) and with HOME set to dir, which the
// user running them can enter.
func childEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgembed: picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ai, err1 := os.Stat(a)
	bi, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}
