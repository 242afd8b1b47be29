package server_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/pgembed"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// TestDBMaxConnsBoundsThePool: a replica opens at most DBMaxConns
// connections to the database (the hub's listener aside), however many
// requests it serves at once.
func TestDBMaxConnsBoundsThePool(t *testing.T) {
	t.Parallel()
	h := servertest.New(t, func(c *server.Config) { c.DBMaxConns = 3; c.NoRunner = true })
	var stats sql.DBStats
	done := make(chan error, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := h.Client(t, alice)
	for range 16 {
		go func() { done <- a.Do(ctx, `{ conversations(first: 50) { edges { node { id } } } }`, nil, nil) }()
	}
	for range 16 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	stats = h.DB.Stats()
	if stats.MaxOpenConnections != 3 || stats.OpenConnections > 3 {
		t.Fatalf("pool stats %+v: want at most 3 open", stats)
	}
}

// TestDatabaseFullIsUnavailable: when the database has no connection
// left for the replica ("too many clients"), a request is answered
// UNAVAILABLE — retryable, never INTERNAL — and writes nothing; the same
// submission re-sent once connections are free is accepted.
func TestDatabaseFullIsUnavailable(t *testing.T) {
	t.Parallel()
	pg := dbtest.StartServer(t, pgembed.Options{MaxConnections: 12})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := server.EnsureDatabase(ctx, pg.URL("postgres"), "fulldb"); err != nil {
		t.Fatal(err)
	}
	h := servertest.New(t, func(c *server.Config) { c.DatabaseURL = pg.URL("fulldb"); c.DBMaxConns = 4; c.NoRunner = true })
	a := h.Client(t, alice)
	room := servertest.Rooms(t, a)["Team room"]

	// Another client of the database takes every connection it can, then
	// ends the replica's own, and takes the slots they free.
	hog, err := sql.Open("postgres", pg.URL("fulldb")+"&application_name=hog")
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	var held []*sql.Conn
	fill := func() {
		for {
			c, err := hog.Conn(ctx)
			if err != nil {
				return // too many clients: the server is full
			}
			if err := c.PingContext(ctx); err != nil {
				c.Close()
				return
			}
			held = append(held, c)
		}
	}
	fill()
	if len(held) == 0 {
		t.Fatal("the hog got no connection")
	}
	// pg_terminate_backend only signals: a backend frees its slot when it
	// has exited, and the replica may open another meanwhile. Repeat until
	// the hog holds every slot and no backend of the replica is left.
	for {
		others(ctx, t, held[0], true)
		fill()
		if others(ctx, t, held[0], false) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the replica's connections did not end")
		case <-time.After(10 * time.Millisecond):
		}
	}

	res, err := a.Raw(ctx, gqlclient.Request{Query: servertest.SubmitMutation, Variables: map[string]any{"c": room.ID, "t": "when there is room", "k": "full-1"}})
	if err != nil {
		t.Fatal(err)
	}
	servertest.CheckCoded(t, res.Errors, "UNAVAILABLE")

	for _, c := range held {
		c.Close()
	}
	hog.Close()
	var out struct {
		SubmitMessage struct{ ID string } `json:"submitMessage"`
	}
	for {
		err := a.Do(ctx, servertest.SubmitMutation, map[string]any{"c": room.ID, "t": "when there is room", "k": "full-1"}, &out)
		if err == nil {
			break
		}
		if gqlclient.CodeOf(err) != "UNAVAILABLE" || ctx.Err() != nil {
			t.Fatalf("re-sent submission: %v", err)
		}
	}
	var turns int
	if err := h.DB.QueryRowContext(ctx, `SELECT count(*) FROM turns WHERE idempotency_key = 'full-1'`).Scan(&turns); err != nil || turns != 1 {
		t.Fatalf("turns with the key: %d, %v; want 1", turns, err)
	}
}

// others counts fulldb's client backends that are not the hog's, having
// asked each to end when terminate is set.
func others(ctx context.Context, t *testing.T, c *sql.Conn, terminate bool) int {
	t.Helper()
	q := `SELECT count(*) FROM pg_stat_activity
WHERE datname = 'fulldb' AND backend_type = 'client backend' AND application_name <> 'hog'`
	if terminate {
		q = `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = 'fulldb' AND backend_type = 'client backend' AND application_name <> 'hog'`
	}
	var n int
	if err := c.QueryRowContext(ctx, q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
