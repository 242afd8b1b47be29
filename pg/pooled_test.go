package pg_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/migrations"
	"github.com/turngate/turngate/pg"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }

// TestOpenKeepsEveryValue: through the one-exchange handle (one exchange
// per statement, parameters in lib/pq's binary mode), JSON reaches jsonb
// as text, bytes reach bytea unchanged (a NUL and a backslash included),
// and NULL JSON is NULL.
func TestOpenKeepsEveryValue(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(string) (*sql.DB, error){"prepared": pg.Open, "unprepared": pg.OpenUnprepared} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, err := open(dbtest.NewDB(t))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			keepsEveryValue(t, db)
		})
	}
}

func keepsEveryValue(t *testing.T, db *sql.DB) {
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE pooled (id int PRIMARY KEY, doc jsonb, raw bytea, note text)`); err != nil {
		t.Fatal(err)
	}
	doc := json.RawMessage(`{"a": [1, "x\\u0000y"]}`)
	raw := []byte("a\x00b\\x41c")
	if _, err := db.ExecContext(ctx, `INSERT INTO pooled VALUES ($1, $2, $3, $4), ($5, $6, NULL, NULL)`, 1, doc, raw, "n", 2, json.RawMessage(nil)); err != nil {
		t.Fatal(err)
	}
	var gotDoc, gotRaw []byte
	var note string
	if err := db.QueryRowContext(ctx, `SELECT doc, raw, note FROM pooled WHERE id = $1`, 1).Scan(&gotDoc, &gotRaw, &note); err != nil {
		t.Fatal(err)
	}
	var want, got any
	json.Unmarshal(doc, &want)
	if err := json.Unmarshal(gotDoc, &got); err != nil || !jsonEqual(want, got) {
		t.Errorf("jsonb: %s, want %s (%v)", gotDoc, doc, err)
	}
	if !bytes.Equal(gotRaw, raw) || note != "n" {
		t.Errorf("bytea %q, text %q; want %q, %q", gotRaw, note, raw, "n")
	}
	var null bool
	if err := db.QueryRowContext(ctx, `SELECT doc IS NULL FROM pooled WHERE id = $1`, 2).Scan(&null); err != nil || !null {
		t.Errorf("nil JSON stored as %v (%v), want NULL", null, err)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// prepared counts the statements the connection holds prepared.
func prepared(t *testing.T, conn *sql.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRowContext(context.Background(), `SELECT count(*) FROM pg_prepared_statements`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpenPlansEachStatementOnce: a connection of pg.Open prepares a
// statement with parameters the first time it runs it and reuses it
// after (PostgreSQL keeps its plan), keeps at most MaxPrepared, and
// prepares it again when a migration changed what it returns; one of
// pg.OpenUnprepared (behind a transaction pooler) prepares nothing.
func TestOpenPlansEachStatementOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewDB(t)
	db, err := pg.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE planned (id int PRIMARY KEY, note text)`); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := conn.ExecContext(ctx, `INSERT INTO planned VALUES ($1, $2)`, i, "n"); err != nil {
			t.Fatal(err)
		}
	}
	// (The count has no parameters: it goes as a simple query.)
	if got := prepared(t, conn); got != 1 {
		t.Errorf("after one statement run 3 times: %d prepared, want 1", got)
	}

	// At most MaxPrepared at once, however many statements run.
	for i := range pg.MaxPrepared + 20 {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(`SELECT $1::int + %d`, i), i); err != nil {
			t.Fatal(err)
		}
	}
	if got := prepared(t, conn); got != pg.MaxPrepared {
		t.Errorf("%d statements prepared, want %d", got, pg.MaxPrepared)
	}

	// The plan of a SELECT * no longer fits once a column is added: the
	// run that meets that fails, the next prepares it again.
	var id int
	var note string
	if err := conn.QueryRowContext(ctx, `SELECT * FROM planned WHERE id = $1`, 1).Scan(&id, &note); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `ALTER TABLE planned ADD COLUMN extra int`); err != nil {
		t.Fatal(err)
	}
	var extra sql.NullInt64
	err = conn.QueryRowContext(ctx, `SELECT * FROM planned WHERE id = $1`, 1).Scan(&id, &note, &extra)
	if err != nil {
		if err := conn.QueryRowContext(ctx, `SELECT * FROM planned WHERE id = $1`, 1).Scan(&id, &note, &extra); err != nil {
			t.Fatalf("after the migration, the statement prepared again: %v", err)
		}
	}

	unprepared, err := pg.OpenUnprepared(url)
	if err != nil {
		t.Fatal(err)
	}
	defer unprepared.Close()
	uconn, err := unprepared.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer uconn.Close()
	for range 3 {
		if _, err := uconn.ExecContext(ctx, `SELECT $1::int`, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := prepared(t, uconn); got != 0 {
		t.Errorf("unprepared: %d statements prepared, want 0", got)
	}
}
