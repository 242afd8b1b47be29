package migrations_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/lib/pq"

	"github.com/turngate/turngate/internal/dbtest"
)

// roomScoped are the tables of a room's own rows: each has a NOT NULL
// conversation_id, and under Citus (docs/scaling.md) each is distributed
// by it, co-located with conversations (distributed by id).
var roomScoped = []string{
	"approvals", "commands", "journal_entries", "model_calls",
	"room_members", "room_resources", "room_summaries", "turn_evidence", "turns",
}

// roomNames are conversations' unique keys that are not its id: the names
// a room is reached by. Under Citus they move to a lookup table
// distributed by name (docs/scaling.md); every other unique key of
// conversations includes id.
var roomNames = []string{"channel", "public_key"}

// TestRoomScopedKeysIncludeTheRoom keeps the Citus plan possible: Citus
// requires every primary and unique key of a distributed table to include
// its distribution column, and a foreign key between co-located tables
// to include it on both sides. Every table with a NOT NULL
// conversation_id is one of roomScoped; each primary and unique key of
// those includes conversation_id; conversations' include id (but for the
// room's names); and every foreign key between them (or to
// conversations) pairs conversation_id with the other table's room
// column.
func TestRoomScopedKeysIncludeTheRoom(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.OpenDB(t)

	var found []string
	rows, err := db.Query(`
SELECT c.relname FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attname = 'conversation_id' AND a.attnotnull
ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		found = append(found, name)
	}
	rows.Close()
	if !slices.Equal(found, roomScoped) {
		t.Fatalf("tables with a NOT NULL conversation_id: %v; the test and docs/scaling.md name %v", found, roomScoped)
	}

	// The room's column of each table: the distribution column.
	roomCol := map[string]string{"conversations": "id"}
	for _, tb := range roomScoped {
		roomCol[tb] = "conversation_id"
	}

	keys := 0
	rows, err = db.Query(`
SELECT c.relname, i.relname,
  array(SELECT a.attname FROM unnest(ix.indkey) k JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k)
FROM pg_index ix JOIN pg_class c ON c.oid = ix.indrelid JOIN pg_class i ON i.oid = ix.indexrelid
WHERE c.relname = ANY($1) AND ix.indisunique`, pq.Array(append(slices.Clone(roomScoped), "conversations")))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tb, index string
		var cols []string
		if err := rows.Scan(&tb, &index, pq.Array(&cols)); err != nil {
			t.Fatal(err)
		}
		keys++
		if slices.Contains(cols, roomCol[tb]) {
			continue
		}
		if tb == "conversations" && len(cols) == 1 && slices.Contains(roomNames, cols[0]) {
			continue
		}
		t.Errorf("%s: unique key %s (%s) does not include %s", tb, index, strings.Join(cols, ", "), roomCol[tb])
	}
	rows.Close()
	if keys < len(roomScoped)+1 {
		t.Fatalf("%d unique keys found: the catalog query is wrong", keys)
	}

	fks := 0
	rows, err = db.Query(`
SELECT c.conname, src.relname, dst.relname,
  array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, o) JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o),
  array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, o) JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o)
FROM pg_constraint c JOIN pg_class src ON src.oid = c.conrelid JOIN pg_class dst ON dst.oid = c.confrelid
WHERE c.contype = 'f' AND src.relname = ANY($1) AND dst.relname = ANY($1)`, pq.Array(append(slices.Clone(roomScoped), "conversations")))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, src, dst string
		var from, to []string
		if err := rows.Scan(&name, &src, &dst, pq.Array(&from), pq.Array(&to)); err != nil {
			t.Fatal(err)
		}
		fks++
		i := slices.Index(from, roomCol[src])
		if i < 0 || to[i] != roomCol[dst] {
			t.Errorf("foreign key %s: %s (%s) -> %s (%s) does not pair %s.%s with %s.%s",
				name, src, strings.Join(from, ", "), dst, strings.Join(to, ", "), src, roomCol[src], dst, roomCol[dst])
		}
	}
	rows.Close()
	if fks == 0 {
		t.Fatal("no foreign key between room-scoped tables found: the catalog query is wrong")
	}
}
