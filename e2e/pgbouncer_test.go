package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
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
	"github.com/turngate/turngate/server"
)

// pgBouncer is a PgBouncer (Debian's package) in transaction pooling mode
// in front of one test database.
type pgBouncer struct {
	url   string // the database through PgBouncer
	admin string // PgBouncer's admin console
	log   *servertest.SyncBuffer
}

// startPgBouncer starts PgBouncer before the database at direct, with
// pool server connections to it, stopped at cleanup. As root (CI) it runs
// as nobody: PgBouncer refuses root.
func startPgBouncer(t *testing.T, direct string, pool int) *pgBouncer {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer"
		if _, err := os.Stat(bin); err != nil {
			t.Fatal("pgbouncer is not installed: apt-get install pgbouncer (see the README's set-up)")
		}
	}
	d, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(d.Host)
	if err != nil {
		t.Fatal(err)
	}
	dbname := strings.TrimPrefix(d.Path, "/")
	dbuser := d.User.Username()

	dir, err := os.MkdirTemp("", "turngate-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ini := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s user=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
`, dbname, host, port, dbname, dbuser, listen, filepath.Join(dir, "userlist.txt"), dbuser, pool)
	for name, body := range map[string]string{
		"pgbouncer.ini": ini,
		"userlist.txt":  fmt.Sprintf("%q \"\"\n", dbuser),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := &pgBouncer{log: &servertest.SyncBuffer{}}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})

	u := *d
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(listen))
	p.url = u.String()
	u.Path = "/pgbouncer"
	p.admin = u.String()

	// Ready when a query through it answers.
	db, err := sql.Open("postgres", p.url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var one int
		err := db.QueryRow("SELECT 1").Scan(&one)
		if err == nil {
			return p
		}
		select {
		case <-exited:
			t.Fatalf("pgbouncer exited: %s", p.log.String())
		case <-deadline:
			t.Fatalf("pgbouncer not ready: %v\n%s", err, p.log.String())
		case <-tick.C:
		}
	}
}

// TestThroughPgBouncerInTransactionPooling: two replicas whose request
// path goes through PgBouncer in transaction pooling mode, with fewer
// server connections than the replicas' pools, serve concurrent turns in
// several rooms to completion; a stream on one replica sees turns run by
// the other (the replicas' LISTEN connections go direct to Postgres, as
// LISTEN/NOTIFY needs a session, and PgBouncer holds none of them).
func TestThroughPgBouncerInTransactionPooling(t *testing.T) {
	t.Parallel()
	direct := dbtest.NewDB(t)
	pgb := startPgBouncer(t, direct, 3)
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := func(replica string) server.Config {
		c := servertest.Config(dataDir, pgb.url, replica)
		c.DBPooler = server.PoolerTransaction
		c.DirectDatabaseURL = direct
		return c
	}
	// Every statement works through the pooler: the replicas log no
	// warning (a failed statement off the request path, such as a model
	// call's record, is only logged).
	logs := &servertest.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h1 := servertest.StartLog(t, cfg("pooled-1"), log)
	h2 := servertest.StartLog(t, cfg("pooled-2"), log)
	defer func() {
		if s := logs.String(); s != "" {
			t.Errorf("the replicas logged warnings:\n%s", s)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A stream on the second replica.
	a2 := h2.Client(t, alice)
	team := servertest.Rooms(t, a2)["Team room"]
	conn := h2.Dial(t, ctx, a2)
	defer conn.Close()
	msgs, err := conn.Subscribe(ctx, "team", gqlclient.Request{Query: servertest.JournalSub, Variables: map[string]any{"c": team.ID, "after": team.Head}})
	if err != nil {
		t.Fatal(err)
	}

	// Concurrent turns through both replicas, in the shared room and in
	// each member's private room.
	type submitted struct {
		c  *gqlclient.Client
		id string
	}
	var (
		mu  sync.Mutex
		all []submitted
		wg  sync.WaitGroup
	)
	for i, h := range []*servertest.Harness{h1, h2} {
		for _, who := range []string{alice, bob} {
			c := h.Client(t, who)
			rs := servertest.Rooms(t, c)
			for title, r := range rs {
				if title != "Team room" && r.Kind != "PRIVATE" {
					continue
				}
				title = strings.Fields(title)[0]
				for k := 0; k < 3; k++ {
					wg.Add(1)
					go func(room, key string) {
						defer wg.Done()
						var out struct {
							SubmitMessage struct{ ID string } `json:"submitMessage"`
						}
						if err := c.Do(ctx, servertest.SubmitMutation, map[string]any{"c": room, "t": "When is the launch?", "k": key}, &out); err != nil {
							t.Errorf("submit %s: %v", key, err)
							return
						}
						mu.Lock()
						all = append(all, submitted{c, out.SubmitMessage.ID})
						mu.Unlock()
					}(r.ID, fmt.Sprintf("pooled-%d-%s-%s-%d", i, who[:3], title[:3], k))
				}
			}
		}
	}
	wg.Wait()
	if t.Failed() {
		t.Fatalf("pgbouncer's log:\n%s", pgb.log.String())
	}
	if len(all) < 12 {
		t.Fatalf("%d turns submitted, want at least 12", len(all))
	}
	for _, s := range all {
		if done := servertest.AwaitTurnEnd(t, ctx, s.c, s.id); done.State != "COMPLETED" {
			t.Fatalf("turn %s ended %s", s.id, done.State)
		}
	}

	// The stream on the second replica saw the shared room's turns end,
	// including those the first replica accepted.
	teamTurns := 0
	for _, s := range all {
		var out struct {
			Turn struct{ ConversationID string }
		}
		if err := s.c.Do(ctx, `query($id: ID!) { turn(id: $id) { conversationId } }`, map[string]any{"id": s.id}, &out); err != nil {
			t.Fatal(err)
		}
		if out.Turn.ConversationID == team.ID {
			teamTurns++
		}
	}
	for ended := 0; ended < teamTurns; {
		if e := servertest.NextJournal[servertest.WireEntry](t, ctx, msgs); e.Kind == "TURN_TERMINAL" {
			ended++
		}
	}

	// The request path went through PgBouncer, and no LISTEN did: every
	// session listening on Postgres comes from a replica directly.
	admin, err := sql.Open("postgres", pgb.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	served := map[int]bool{} // PgBouncer's own ports towards Postgres
	rows, err := admin.Query("SHOW SERVERS")
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			if c == "local_port" {
				n, _ := strconv.Atoi(fmt.Sprint(vals[i]))
				served[n] = true
			}
		}
	}
	rows.Close()
	if len(served) == 0 {
		t.Fatal("PgBouncer holds no server connection: the request path did not go through it")
	}
	db, err := sql.Open("postgres", direct)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ports []int
	rows, err = db.Query(`SELECT client_port FROM pg_stat_activity
	  WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p int
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p)
	}
	rows.Close()
	if len(ports) < 2 {
		t.Fatalf("%d LISTEN sessions on Postgres, want one per replica", len(ports))
	}
	for _, p := range ports {
		if served[p] {
			t.Errorf("a LISTEN session (client port %d) goes through PgBouncer", p)
		}
	}
}
