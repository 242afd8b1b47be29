package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/tools"
)

// TestHistorySearchFindsTheNewestMatches checks both ways history_search
// finds its candidates against what they must return: the newest
// matching finished turns of the member's rooms, best first (ties newest
// first). 2,600 finished turns are loaded (more than the search walks
// before it asks the full-text index), then:
//   - a word in every turn: the walk finds enough matches among the
//     newest turns, and the hits are the newest turns;
//   - a word only in turns older than the walk: the index finds them;
//   - a word in a few new turns and many old ones: the walk finds too
//     few, and the hits are still the newest matches;
//   - newer matches in a room the member is not in are never found, and
//     neither is a turn that is not finished.
func TestHistorySearchFindsTheNewestMatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testkit.New(t)
	var avID uuid.UUID
	if err := env.DB.QueryRowContext(ctx, `SELECT id FROM agent_versions ORDER BY version DESC LIMIT 1`).Scan(&avID); err != nil {
		t.Fatal(err)
	}
	// A room Alice is not in, with the newest turns of all.
	var elsewhere uuid.UUID
	if err := env.DB.QueryRowContext(ctx, `SELECT id FROM conversations c WHERE NOT EXISTS (
  SELECT 1 FROM room_members rm WHERE rm.conversation_id = c.id AND rm.member_id = $1) LIMIT 1`, env.Alice.ID).Scan(&elsewhere); err != nil {
		t.Fatalf("a room Alice is not in: %v", err)
	}

	const n = 2600
	base := time.Now().Add(-time.Hour)
	type row struct {
		id    uuid.UUID
		room  uuid.UUID
		input string
		state string
		at    time.Time
	}
	var rows []row
	for i := range n {
		input := fmt.Sprintf("everyword turn%d", i)
		switch {
		case i < 300:
			input += " ancientword" // old turns only
		case i >= n-3:
			input += " mixedword" // three of the newest
		}
		if i < 250 {
			input += " mixedword" // and many old ones
		}
		rows = append(rows, row{uuid.New(), env.Shared.ID, input, "completed", base.Add(time.Duration(i) * time.Millisecond)})
	}
	// Newer than all of them: matches elsewhere, and an unfinished turn.
	for i := range 50 {
		rows = append(rows, row{uuid.New(), elsewhere, "everyword mixedword ancientword", "completed", base.Add(time.Duration(n+i) * time.Millisecond)})
	}
	unfinished := row{uuid.New(), env.Shared.ID, "everyword mixedword ancientword", "queued", base.Add(time.Duration(n+100) * time.Millisecond)}
	rows = append(rows, unfinished)

	tx, err := env.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := tx.Prepare(pq.CopyIn("turns", "id", "idempotency_key", "input", "answer", "position", "state", "agent_version_id",
		"authority_bundle", "authority_digest", "conversation_id", "author_id", "created_at", "started_at", "finished_at"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		var finished any
		if r.state == "completed" {
			finished = r.at
		}
		if _, err := stmt.Exec(r.id, fmt.Sprintf("history-test-%d", i), r.input, "an answer", 1_000_000+i, r.state, avID,
			"{}", "test", r.room, env.Alice.ID, r.at, r.at, finished); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stmt.Exec(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	actor := tools.Actor{MemberID: env.Alice.ID, Email: env.Alice.Email, ConversationID: env.Shared.ID, TurnID: uuid.New(), Shared: true}
	search := func(q string) []string {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"query": q})
		res, err := tools.HistorySearch{}.Run(ctx, tools.Call{Actor: actor, DB: env.DB, Arguments: args, Now: time.Now()})
		if err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
		var ids []string
		for _, c := range res.Citations {
			ids = append(ids, c.ID)
		}
		return ids
	}
	cites := func(idx ...int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, "turn:"+rows[i].id.String())
		}
		return out
	}

	// Every turn matches: the five newest, each ranking alike.
	if got, want := search("everyword"), cites(n-1, n-2, n-3, n-4, n-5); !slices.Equal(got, want) {
		t.Errorf("a word in every turn: got %v, want the newest five %v", got, want)
	}
	// Only old turns match, older than any walk of the newest.
	if got, want := search("ancientword"), cites(299, 298, 297, 296, 295); !slices.Equal(got, want) {
		t.Errorf("a word only in old turns: got %v, want the newest five of them %v", got, want)
	}
	// Three new matches, then 250 old ones: the newest five, across both.
	if got, want := search("mixedword"), cites(n-1, n-2, n-3, 249, 248); !slices.Equal(got, want) {
		t.Errorf("a word in a few new and many old turns: got %v, want %v", got, want)
	}
	// A turn is found by its own number, however old.
	if got, want := search("turn7"), cites(7); !slices.Equal(got, want) {
		t.Errorf("one turn's own word: got %v, want %v", got, want)
	}
}
