package pgembed

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Environment of the helper process (see TestMain): it starts a server in
// the folder named by helperDirEnv, prints "PID PORT" and blocks until killed.
const (
	helperDirEnv       = "PGEMBED_TEST_HELPER_DIR"
	helperNoDeathsigEn = "PGEMBED_TEST_HELPER_NO_PDEATHSIG"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperDirEnv); dir != "" {
		os.Exit(helperMain(dir))
	}
	os.Exit(m.Run())
}

func helperMain(dir string) int {
	if os.Getenv(helperNoDeathsigEn) == "1" {
		pdeathsig = 0 // simulate a system without parent-death signals
	}
	p, err := Start(context.Background(), Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d %d\n", p.cmd.Process.Pid, p.Port())
	io.Copy(io.Discard, os.Stdin) // until the parent closes stdin (or kills us)
	if err := p.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// testDir returns a fresh folder the postgres user can reach (unlike
// t.TempDir, whose parent is private to root).
func testDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgembed-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func start(t *testing.T, dir string) *Postgres {
	t.Helper()
	p, err := Start(t.Context(), Options{Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}

func open(t *testing.T, p *Postgres) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", p.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestStartQueryStop(t *testing.T) {
	t.Parallel()
	p := start(t, testDir(t))
	db := open(t, p)
	var one int
	if err := db.QueryRowContext(t.Context(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	db.Close()

	pid := p.cmd.Process.Pid
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port())), time.Second); err == nil {
		c.Close()
		t.Errorf("port %d still accepts connections after Stop", p.Port())
	}
	if processAlive(pid) {
		t.Errorf("postgres (pid %d) still running after Stop", pid)
	}
}

func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	p := start(t, dir)
	db := open(t, p)
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	version, err := os.Stat(dir + "/pgdata/PG_VERSION")
	if err != nil {
		t.Fatal(err)
	}

	p = start(t, dir)
	var v string
	if err := open(t, p).QueryRowContext(t.Context(), "SELECT v FROM kept").Scan(&v); err != nil || v != "hello" {
		t.Fatalf("after restart: v = %q, %v", v, err)
	}
	if again, err := os.Stat(dir + "/pgdata/PG_VERSION"); err != nil || !again.ModTime().Equal(version.ModTime()) {
		t.Errorf("cluster was re-initialized (PG_VERSION changed: %v)", err)
	}
}

// TestCrashedParent kills (SIGKILL) a process that started a server and
// checks that the server does not survive it.
func TestCrashedParent(t *testing.T) {
	t.Parallel()
	t.Run("pdeathsig", func(t *testing.T) {
		t.Parallel()
		dir := testDir(t)
		pid := startInHelperAndKill(t, dir, false)
		if !waitGone(pid, 15*time.Second) {
			t.Fatalf("postgres (pid %d) survived its parent", pid)
		}
		queryOK(t, start(t, dir))
	})
	t.Run("orphan guard", func(t *testing.T) {
		t.Parallel()
		dir := testDir(t)
		pid := startInHelperAndKill(t, dir, true)
		if !processAlive(pid) {
			t.Fatalf("without parent-death signal, postgres (pid %d) should have survived its parent", pid)
		}
		p := start(t, dir) // must stop the orphan, whose postmaster.pid is still there
		if processAlive(pid) {
			t.Errorf("orphaned postgres (pid %d) still running after Start", pid)
		}
		queryOK(t, p)
	})
}

// startInHelperAndKill starts a server in dir from a child process, kills
// that child with SIGKILL and returns the server's PID.
func startInHelperAndKill(t *testing.T, dir string, noDeathsig bool) int {
	t.Helper()
	cmd, pid, _ := startInHelper(t, dir, noDeathsig)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("helper exited cleanly despite SIGKILL")
	}
	return pid
}

// startInHelper starts a server in dir from a child process and returns
// the child, the server's PID and its port. The child stops its server and
// exits when the test ends.
func startInHelper(t *testing.T, dir string, noDeathsig bool) (*exec.Cmd, int, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	if noDeathsig {
		cmd.Env = append(cmd.Env, helperNoDeathsigEn+"=1")
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper did not report a server: %v", err)
	}
	var pid, port int
	if _, err := fmt.Sscan(line, &pid, &port); err != nil {
		t.Fatalf("helper said %q: %v", line, err)
	}
	t.Cleanup(func() { // in case the test fails before the server is gone
		stdin.Close() // a live helper stops its server and exits
		cmd.Wait()
		if processAlive(pid) && isPostmasterOf(pid, dir+"/pgdata") {
			syscall.Kill(pid, syscall.SIGQUIT)
			waitGone(pid, 10*time.Second)
		}
	})
	return cmd, pid, port
}

// TestLiveOwnerKeepsItsServer: a second Start on a folder whose server
// another live process owns (a second `make run`, say) refuses, naming
// that process and what to do instead, and leaves the running server
// alone: it still answers.
func TestLiveOwnerKeepsItsServer(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	owner, pid, port := startInHelper(t, dir, false)
	_, err := Start(t.Context(), Options{Dir: dir})
	if err == nil {
		t.Fatal("a second Start on a folder in use succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, "in use by process "+strconv.Itoa(owner.Process.Pid)) || !strings.Contains(msg, "TURNGATE_DATA") {
		t.Errorf("refusal %q: want it to name the owner (pid %d) and another data folder", msg, owner.Process.Pid)
	}
	if !processAlive(pid) {
		t.Fatalf("the owner's postgres (pid %d) was stopped", pid)
	}
	db, err := sql.Open("postgres", (&Postgres{port: port}).URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var one int
	if err := db.QueryRowContext(t.Context(), "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("the owner's server no longer answers: %v", err)
	}
}

func queryOK(t *testing.T, p *Postgres) {
	t.Helper()
	var one int
	if err := open(t, p).QueryRowContext(t.Context(), "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
}

// TestNoBinaries is not parallel because it sets an environment variable;
// Go runs it before resuming the parallel tests, so they do not see it.
func TestNoBinaries(t *testing.T) {
	t.Setenv("TURNGATE_PG_BIN", t.TempDir())
	_, err := Start(t.Context(), Options{Dir: t.TempDir()})
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("Start = %v, want ErrNoBinaries", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "apt-get install -y postgresql") {
		t.Errorf("message %q: want one line naming the Debian package", msg)
	}
}

func TestStartReportsLogOnFailure(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	// A corrupt configuration makes postgres exit at startup.
	p := start(t, dir)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(dir+"/pgdata/postgresql.conf", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("\nno_such_setting = 1\n")
	if err := errors.Join(err, f.Close()); err != nil {
		t.Fatal(err)
	}
	_, err = Start(t.Context(), Options{Dir: dir})
	if err == nil {
		t.Fatal("Start succeeded with a broken configuration")
	}
	t.Logf("Start failed as expected: %v", err)
	if !strings.Contains(err.Error(), "no_such_setting") {
		t.Errorf("error does not quote the server log: %v", err)
	}
}

// TestMaxConnections: Options.MaxConnections reaches the server, and zero
// keeps PostgreSQL's default.
func TestMaxConnections(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ set, want int }{{0, 100}, {150, 150}} {
		p, err := Start(t.Context(), Options{Dir: testDir(t), MaxConnections: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop() })
		db := open(t, p)
		var got int
		if err := db.QueryRowContext(t.Context(), "SHOW max_connections").Scan(&got); err != nil || got != tc.want {
			t.Errorf("MaxConnections %d: max_connections = %d, %v; want %d", tc.set, got, err, tc.want)
		}
		db.Close()
	}
}
