package pg_test

import (
	"bytes"
	"context"
	"encoding/json"
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
	db, err := pg.Open(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
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
