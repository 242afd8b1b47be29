package dbtest

import (
	"context"
	"database/sql"
	"flag"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/pgembed"
)

func TestMain(m *testing.M) { os.Exit(Main(m, testMigrate)) }

// testMigrate stands in for the real migrations: one table.
func testMigrate(ctx context.Context, url string) error {
	db, err := sql.Open("postgres", url)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "CREATE TABLE items (id serial PRIMARY KEY, owner text NOT NULL)")
	return err
}

func dbName(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// TestParallelIsolation runs two parallel tests, each in its own database
// with the template's schema, and checks that neither sees the other's row.
// When -parallel allows it, both write before either checks.
func TestParallelIsolation(t *testing.T) {
	names := []string{"a", "b"}
	var (
		mu   sync.Mutex
		dbs  = map[string]string{}
		done = map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	)
	concurrent := true
	if f := flag.Lookup("test.parallel"); f != nil {
		n, _ := strconv.Atoi(f.Value.String())
		concurrent = n >= 2
	}
	t.Run("group", func(t *testing.T) {
		for i, name := range names {
			other := names[1-i]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				db, u := OpenDB(t)
				mu.Lock()
				dbs[name] = dbName(t, u)
				mu.Unlock()
				if _, err := db.ExecContext(t.Context(), "INSERT INTO items (owner) VALUES ($1)", name); err != nil {
					t.Fatal(err)
				}
				close(done[name])
				if concurrent {
					select {
					case <-done[other]:
					case <-t.Context().Done():
					case <-time.After(30 * time.Second):
						t.Fatalf("test %s never wrote its row", other)
					}
				}
				rows, err := db.QueryContext(t.Context(), "SELECT owner FROM items")
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var owners []string
				for rows.Next() {
					var o string
					if err := rows.Scan(&o); err != nil {
						t.Fatal(err)
					}
					owners = append(owners, o)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				if len(owners) != 1 || owners[0] != name {
					t.Errorf("test %s sees rows %q, want only its own", name, owners)
				}
			})
		}
	})
	if dbs["a"] == "" || dbs["a"] == dbs["b"] {
		t.Errorf("databases %q and %q, want distinct", dbs["a"], dbs["b"])
	}
	for _, name := range dbs { // dropped by the subtests' cleanups
		if databaseExists(t, name) {
			t.Errorf("database %s still exists after its test", name)
		}
	}
}

// TestSequentialClones checks isolation without relying on parallelism, and
// that a connection left open does not prevent the drop.
func TestSequentialClones(t *testing.T) {
	t.Parallel()
	var name string
	var leaky *sql.DB
	t.Run("leaky", func(t *testing.T) {
		u := NewDB(t)
		name = dbName(t, u)
		var err error
		if leaky, err = sql.Open("postgres", u); err != nil {
			t.Fatal(err)
		}
		// Left open past the subtest: DROP ... WITH (FORCE) must cope.
		if _, err := leaky.ExecContext(t.Context(), "INSERT INTO items (owner) VALUES ('leaky')"); err != nil {
			t.Fatal(err)
		}
	})
	if databaseExists(t, name) {
		t.Errorf("database %s still exists after its test", name)
	}
	leaky.Close()
	db, _ := OpenDB(t)
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM items").Scan(&n); err != nil || n != 0 {
		t.Errorf("fresh database has %d rows (%v), want 0", n, err)
	}
}

// TestManyClones exercises the clone lock with more parallel tests.
func TestManyClones(t *testing.T) {
	t.Parallel()
	for i := range 8 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			db, _ := OpenDB(t)
			if _, err := db.ExecContext(t.Context(), "INSERT INTO items (owner) VALUES ('x')"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestStartServerDurable(t *testing.T) {
	t.Parallel()
	pg := StartServer(t, pgembed.Options{Durable: true})
	db, err := sql.Open("postgres", pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var fsync string
	if err := db.QueryRowContext(t.Context(), "SHOW fsync").Scan(&fsync); err != nil || fsync != "on" {
		t.Errorf("fsync = %q (%v), want on", fsync, err)
	}
}

func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	var exists bool
	err := srv.admin.QueryRowContext(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil {
		t.Fatal(err)
	}
	return exists
}

func TestRemoveStaleDirs(t *testing.T) {
	t.Parallel()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	mk := func(pid int, withPidFile bool) string {
		dir, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(pid)+"-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if withPidFile {
			if err := os.MkdirAll(dir+"/pgdata", 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir+"/pgdata/postmaster.pid", []byte("1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	stale := mk(dead.Process.Pid, false)
	live := mk(os.Getpid(), false)
	serving := mk(dead.Process.Pid, true)
	removeStaleDirs()
	for dir, wantGone := range map[string]bool{stale: true, live: false, serving: false} {
		_, err := os.Stat(dir)
		if gone := os.IsNotExist(err); gone != wantGone {
			t.Errorf("%s: removed = %v, want %v", dir, gone, wantGone)
		}
	}
}
