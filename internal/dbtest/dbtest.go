package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"time"

	"github.com/lib/pq"

	"github.com/turngate/turngate/internal/pgembed"
	"github.com/turngate/turngate/pg"
)

// EnvDatabaseURL names the environment variable that points the tests at an
// existing server instead of a private one.
const EnvDatabaseURL = "TURNGATE_TEST_DATABASE_URL"

// MigrateFunc applies the schema to the database at url (supplied by
// callers, e.g. the migrations package, which dbtest must not import). It
// must close its connections before returning; any it leaves open to the
// template are terminated.
type MigrateFunc func(ctx context.Context, url string) error

const (
	dirPrefix    = "turngate-dbtest-" // + pid + "-" + random, under os.TempDir()
	setupTimeout = 2 * time.Minute
	maxIdleConns = 64 // per OpenDB handle; SetMaxOpenConns below it lowers it
	queryTimeout = time.Minute
)

var (
	migrate MigrateFunc // set by Main

	setupOnce sync.Once
	srv       *server // set by setupOnce when setup succeeds
	setupErr  error

	// cloneMu serializes CREATE DATABASE ... TEMPLATE: PostgreSQL refuses to
	// copy a database while another session (here, a concurrent clone) uses it.
	cloneMu sync.Mutex
)

type server struct {
	pg       *pgembed.Postgres // nil when EnvDatabaseURL is set
	dir      string            // pg's folder
	base     *url.URL          // URL of the database used for administration
	admin    *sql.DB
	template string // "" until created
	strategy string // CREATE DATABASE option for clones
}

// Runner runs a package's tests: a *testing.M, or one that wraps it to
// stop what the package's tests share before the leak check.
type Runner interface{ Run() int }

// Main runs the tests (m.Run) and then stops the private server, if one was
// started, and removes its folder. It returns the exit code for os.Exit,
// which is non-zero if that cleanup fails.
func Main(m Runner, fn MigrateFunc) int {
	if fn == nil {
		panic("dbtest.Main: nil MigrateFunc")
	}
	migrate = fn
	code := m.Run()
	if srv != nil {
		if err := srv.close(); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	// Every goroutine a test started must have ended with it: runners,
	// hubs, followers and their database connections all have owners that
	// stop them. (Only the HTTP client's idle keep-alive connections are
	// left to the process.)
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: goroutines leaked by the tests: %v\n", err)
			code = 1
		}
	}
	return code
}

// NewDB creates a database cloned from the migrated template, drops it (WITH
// (FORCE), so connections left open do not matter) when t ends, and returns
// its URL.
func NewDB(t testing.TB) string {
	t.Helper()
	s, err := get()
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	name := "turngate_test_" + randomHex()
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	cloneMu.Lock()
	_, err = s.admin.ExecContext(ctx, "CREATE DATABASE "+pq.QuoteIdentifier(name)+" TEMPLATE "+pq.QuoteIdentifier(s.template)+s.strategy)
	cloneMu.Unlock()
	if err != nil {
		t.Fatalf("dbtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
		defer cancel()
		if _, err := s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+pq.QuoteIdentifier(name)+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: dropping database %s: %v", name, err)
		}
	})
	return s.dbURL(name)
}

// OpenDB is [NewDB] opened as a replica opens its database (pg.Open: one
// round trip per statement); the *sql.DB is closed when t ends, before the
// database is dropped.
func OpenDB(t testing.TB) (*sql.DB, string) {
	t.Helper()
	u := NewDB(t)
	db, err := pg.Open(u)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	// Keep the connections a test opened, as a replica's pool does
	// (server.App keeps as many idle as open): with database/sql's
	// default of two, a test with many goroutines closes and reopens
	// connections all the time, and each new one is a PostgreSQL backend
	// that starts with cold caches on a database it has never seen.
	db.SetMaxIdleConns(maxIdleConns)
	t.Cleanup(func() { db.Close() })
	return db, u
}

// StartServer starts a separate private server for tb, e.g. a durable one
// for a benchmark (opts.Durable = true), and stops it when tb's cleanups
// run. If opts.Dir is empty, the server lives in a fresh folder under
// os.TempDir(), removed afterwards. Nothing is migrated: create a database
// through URL("postgres") and apply the schema to it.
func StartServer(tb testing.TB, opts pgembed.Options) *pgembed.Postgres {
	tb.Helper()
	if opts.Dir == "" {
		dir, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			tb.Fatalf("dbtest: %v", err)
		}
		tb.Cleanup(func() { os.RemoveAll(dir) })
		opts.Dir = dir
	}
	pg, err := pgembed.Start(tb.Context(), opts)
	if err != nil {
		tb.Fatalf("dbtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := pg.Stop(); err != nil {
			tb.Errorf("dbtest: %v", err)
		}
	})
	return pg
}

func get() (*server, error) {
	if migrate == nil {
		return nil, errors.New("call dbtest.Main from TestMain: func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }")
	}
	setupOnce.Do(func() {
		s, err := setup()
		if err != nil {
			setupErr = fmt.Errorf("setting up the test database server: %w", err)
			if cerr := s.close(); cerr != nil {
				setupErr = errors.Join(setupErr, cerr)
			}
			return
		}
		srv = s
	})
	return srv, setupErr
}

// setup connects to (or starts) the server and creates the template. On
// error, the returned server holds what must be cleaned up.
func setup() (*server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	s := &server{}
	if raw := os.Getenv(EnvDatabaseURL); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return s, fmt.Errorf("%s must be a postgres:// URL, got %q", EnvDatabaseURL, raw)
		}
		s.base = u
	} else {
		removeStaleDirs()
		dir, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			return s, err
		}
		s.dir = dir
		if s.pg, err = pgembed.Start(ctx, pgembed.Options{Dir: dir}); err != nil {
			return s, err
		}
		if s.base, err = url.Parse(s.pg.URL("postgres")); err != nil {
			return s, err
		}
	}
	var err error
	if s.admin, err = sql.Open("postgres", s.base.String()); err != nil {
		return s, err
	}
	name := "turngate_tmpl_" + randomHex()
	if _, err := s.admin.ExecContext(ctx, "CREATE DATABASE "+pq.QuoteIdentifier(name)); err != nil {
		return s, fmt.Errorf("creating the template database: %w", err)
	}
	s.template = name
	if err := migrate(ctx, s.dbURL(name)); err != nil {
		return s, fmt.Errorf("migrating the template database: %w", err)
	}
	// Nothing may stay connected to the template, or cloning it fails with
	// "source database is being accessed by other users".
	if _, err := s.admin.ExecContext(ctx, "ALTER DATABASE "+pq.QuoteIdentifier(name)+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return s, err
	}
	if _, err := s.admin.ExecContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
		return s, err
	}
	// On a non-durable server (the private one, or the one make test
	// shares between packages), copying files (and checkpointing, which
	// costs little without fsync) clones and drops a small database
	// faster than the default WAL_LOG strategy of PostgreSQL 15+.
	var version int
	var fsync string
	if err := s.admin.QueryRowContext(ctx, "SELECT current_setting('server_version_num')::int, current_setting('fsync')").Scan(&version, &fsync); err != nil {
		return s, err
	}
	if fsync == "off" && version >= 150000 {
		s.strategy = " STRATEGY FILE_COPY"
	}
	return s, nil
}

// close drops the template (only needed on a shared server) and stops the
// private server.
func (s *server) close() error {
	var errs []error
	if s.admin != nil {
		if s.template != "" && s.pg == nil {
			ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
			_, err := s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+pq.QuoteIdentifier(s.template)+" WITH (FORCE)")
			cancel()
			errs = append(errs, err)
		}
		errs = append(errs, s.admin.Close())
	}
	if s.pg != nil {
		errs = append(errs, s.pg.Stop())
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

func (s *server) dbURL(name string) string {
	u := *s.base
	u.Path, u.RawPath = "/"+name, ""
	return u.String()
}

func randomHex() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// removeStaleDirs removes the folders of earlier test binaries that died
// without cleaning up (killed, or timed out: their server died with them).
// It keeps folders whose process still runs, whose server may still run
// (postmaster.pid present) or that are recent (possibly being set up by a
// process this one cannot see).
func removeStaleDirs() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), dirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		dir := filepath.Join(os.TempDir(), e.Name())
		if _, err := os.Lstat(filepath.Join(dir, "pgdata", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < 10*time.Minute {
			continue
		}
		os.RemoveAll(dir)
	}
}
