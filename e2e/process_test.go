package e2e

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/e2etest"
	"github.com/turngate/turngate/internal/gqlclient"
	"github.com/turngate/turngate/internal/servertest"
	"github.com/turngate/turngate/server"
)

// TestServeOnEmbeddedDefaults runs the real binary as `make run` does: no
// DATABASE_URL, so it starts its own Postgres in the data folder, migrates,
// seeds the demo and prints the explorer's address. A token minted by
// `turngate token` from the same data folder is accepted. SIGTERM stops it
// cleanly and takes the private Postgres down with it; a second start
// reuses the data folder.
func TestServeOnEmbeddedDefaults(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	// The postgres user must be able to enter the data folder's parents,
	// which t.TempDir (0700, root's) does not allow.
	dataDir, err := os.MkdirTemp("", "turngate-serve-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dataDir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dataDir) })

	for run := 1; run <= 2; run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0")
		cmd.Env = append(e2etest.CleanEnv(), "TURNGATE_DATA="+dataDir, "TURNGATE_MODEL_PACE=0s")
		stdout, stdoutW := io.Pipe()
		cmd.Stdout = stdoutW
		cmd.Stderr = e2etest.NewPrefixWriter(t, fmt.Sprintf("serve#%d: ", run))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		base := e2etest.WaitForAddress(t, stdout)

		tokCmd := exec.Command(bin, "token", "--email", "bob@example.com")
		tokCmd.Env = append(e2etest.CleanEnv(), "TURNGATE_DATA="+dataDir)
		tok, err := tokCmd.Output()
		if err != nil {
			t.Fatalf("turngate token: %v", err)
		}
		c := &gqlclient.Client{URL: base + "/graphql", Header: http.Header{"X-Turngate-Identity": {strings.TrimSpace(string(tok))}}}
		var me struct {
			Me struct{ Email string } `json:"me"`
		}
		if err := c.Do(ctx, `{ me { email } }`, nil, &me); err != nil || me.Me.Email != "bob@example.com" {
			t.Fatalf("run %d: me = %+v, %v", run, me, err)
		}
		if got := len(servertest.Rooms(t, c)); got != 2 { // the team room and bob's notes, seeded once
			t.Fatalf("run %d: bob is in %d rooms, want 2", run, got)
		}
		pgPid := e2etest.PostmasterPid(t, dataDir)

		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		stdoutW.Close()
		if err != nil {
			t.Fatalf("run %d: turngate exited with %v after SIGTERM, want a clean exit", run, err)
		}
		if e2etest.Alive(pgPid) {
			t.Fatalf("run %d: the private postgres (pid %d) outlived turngate", run, pgPid)
		}
		cancel()
	}
}

// TestMigrateCommand: `turngate migrate` applies the schema to
// DATABASE_URL and reports the version; running it again is a no-op.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	url := freshDatabase(t)
	for range 2 {
		cmd := exec.Command(bin, "migrate")
		cmd.Env = append(e2etest.CleanEnv(), "DATABASE_URL="+url)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "database at schema version") {
			t.Fatalf("turngate migrate: %v\n%s", err, out)
		}
	}
}

// freshDatabase creates an empty database (no schema) for the test.
func freshDatabase(t *testing.T) string {
	t.Helper()
	db, base := dbtest.OpenDB(t)
	name := fmt.Sprintf("fresh_%d", time.Now().UnixNano())
	if _, err := db.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec(`DROP DATABASE ` + name + ` WITH (FORCE)`) })
	u, err := neturl.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// TestTokenUsesTheServersKey: `turngate token` signs with the dev key of
// the server's data folder and never makes one: pointed at a folder with
// no key it fails, naming the folder and what to do, and leaves no key
// behind; pointed at the server's folder (TURNGATE_DATA or --data), its
// envelope verifies against the server's key.
func TestTokenUsesTheServersKey(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	empty := t.TempDir()
	cmd := exec.Command(bin, "token", "--email", alice)
	cmd.Env = append(e2etest.CleanEnv(), "TURNGATE_DATA="+empty)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("token without a key succeeded: %s", out)
	}
	if !strings.Contains(string(out), "no dev key in "+empty) || !strings.Contains(string(out), "--data") {
		t.Errorf("token without a key said %q: want the folder and how to point at the server's", out)
	}
	if _, err := os.Stat(filepath.Join(empty, authority.DevKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("token made a key: %v", err)
	}

	serverDir := t.TempDir()
	key, err := authority.LoadOrCreateDevKey(serverDir) // as the server does on its first start
	if err != nil {
		t.Fatal(err)
	}
	v, err := authority.NewVerifier(authority.VerifierConfig{Issuer: server.DevIssuer, Audience: server.DevAudience, PublicKey: key.Public().(ed25519.PublicKey)})
	if err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"TURNGATE_DATA": {"token", "--email", alice},
		"--data":        {"token", "--email", alice, "--data", serverDir},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = t.TempDir() // another directory than the server's
		cmd.Env = e2etest.CleanEnv()
		if name == "TURNGATE_DATA" {
			cmd.Env = append(cmd.Env, "TURNGATE_DATA="+serverDir)
		}
		tok, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: token: %v", name, err)
		}
		if id, err := v.Verify(strings.TrimSpace(string(tok))); err != nil || id.Email != alice {
			t.Fatalf("%s: the envelope does not verify with the server's key: %+v, %v", name, id, err)
		}
	}
}

// TestTokenLifetime: `turngate token`'s default envelope (a day) passes a
// verifier with the default maximum lifetime, and a --ttl longer than the
// server would accept is refused before anything is minted, naming the
// setting.
func TestTokenLifetime(t *testing.T) {
	t.Parallel()
	bin := e2etest.Binary(t)
	keyDir := t.TempDir()
	key, err := authority.LoadOrCreateDevKey(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := authority.NewVerifier(authority.VerifierConfig{Issuer: server.DevIssuer, Audience: server.DevAudience,
		PublicKey: key.Public().(ed25519.PublicKey), MaxLifetime: server.DefaultEnvelopeMaxLifetime})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "token", "--email", alice, "--data", keyDir)
	cmd.Env = e2etest.CleanEnv()
	tok, err := cmd.Output()
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	if _, err := v.Verify(strings.TrimSpace(string(tok))); err != nil {
		t.Fatalf("the default envelope under a maximum lifetime of %v: %v", server.DefaultEnvelopeMaxLifetime, err)
	}
	for _, env := range [][]string{nil, {"TURNGATE_ENVELOPE_MAX_LIFETIME=1h"}} {
		ttl := "721h" // past the dev page's 30 days
		if env != nil {
			ttl = "2h"
		}
		cmd := exec.Command(bin, "token", "--email", alice, "--data", keyDir, "--ttl", ttl)
		cmd.Env = append(e2etest.CleanEnv(), env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "TURNGATE_ENVELOPE_MAX_LIFETIME") {
			t.Fatalf("token --ttl %s with %v: %v, %q; want a refusal naming TURNGATE_ENVELOPE_MAX_LIFETIME", ttl, env, err, out)
		}
	}
}
