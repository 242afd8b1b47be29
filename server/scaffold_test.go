package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/gqlclient"
)

// The scaffolding the server's tests share: reading a journal
// subscription, dialling the GraphQL WebSocket as a member, and a private
// database with a data folder for real turngate processes.

// nextJournal reads the next journal entry of a subscription, decoded as
// E (each test names the fields it selects), failing the test when the
// subscription ends, errs or ctx's deadline passes first.
func nextJournal[E any](t *testing.T, ctx context.Context, msgs <-chan gqlclient.Message) E {
	t.Helper()
	var zero E
	select {
	case m, ok := <-msgs:
		if !ok {
			t.Fatal("subscription ended early")
		}
		if m.Type != "next" {
			t.Fatalf("subscription message %s: %s", m.Type, m.Payload)
		}
		var r struct {
			Data struct {
				Journal E `json:"journal"`
			} `json:"data"`
			Errors []gqlclient.Error `json:"errors"`
		}
		if err := jsonUnmarshal(m.Payload, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Errors) > 0 {
			t.Fatalf("subscription error: %+v", r.Errors)
		}
		return r.Data.Journal
	case <-ctx.Done():
		t.Fatal("timed out waiting for a journal entry")
	}
	return zero
}

// processWorld is what real turngate processes of one test share: a
// private database, a data folder (the dev key the test mints envelopes
// with) and a handle on the database for the test's own reads.
type processWorld struct {
	bin, dbURL, dataDir string
	db                  *sql.DB
}

// newProcessWorld makes a test's database and data folder (named with
// prefix), both removed at cleanup.
func newProcessWorld(t testing.TB, bin, prefix string) *processWorld {
	t.Helper()
	w := &processWorld{bin: bin, dbURL: dbtest.NewDB(t)}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w.dataDir = dir
	if w.db, err = sql.Open("postgres", w.dbURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.db.Close() })
	return w
}

// start starts a replica named name on the world's database and folder.
func (w *processWorld) start(t testing.TB, name string, env ...string) *replica {
	t.Helper()
	return startReplica(t, w.bin, name, w.dbURL, w.dataDir, env...)
}

// client is a GraphQL client for email on the replica at base.
func (w *processWorld) client(t *testing.T, base, email string) *gqlclient.Client {
	t.Helper()
	return clientFor(t, w.bin, base, w.dataDir, email)
}

// modelRequests keeps the request bodies a fake model endpoint received.
type modelRequests struct {
	mu     sync.Mutex
	bodies []map[string]any
}

// record decodes r's JSON body and keeps it, returning it and how many
// bodies are kept with it; a body that is not JSON is answered 400 and
// reported not ok.
func (m *modelRequests) record(w http.ResponseWriter, r *http.Request) (map[string]any, int, bool) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bodies = append(m.bodies, body)
	return body, len(m.bodies), true
}

// submitAs submits text to room as c and returns the turn's id.
func submitAs(t *testing.T, ctx context.Context, c *gqlclient.Client, room, text, key string) string {
	t.Helper()
	var out struct {
		SubmitMessage struct{ ID string } `json:"submitMessage"`
	}
	if err := c.Do(ctx, submit, map[string]any{"c": room, "t": text, "k": key}, &out); err != nil {
		t.Fatalf("submit %s: %v", key, err)
	}
	return out.SubmitMessage.ID
}
