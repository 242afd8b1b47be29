package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/sandbox"
	"github.com/turngate/turngate/tools"
)

// newRunCode returns run_code with a sandbox pool of its own, stopped when
// the test ends.
func newRunCode(t *testing.T, cfg sandbox.PoolConfig) tools.RunCode {
	t.Helper()
	pool := sandbox.NewPool(cfg)
	t.Cleanup(pool.Stop)
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tools.RunCode{Sandbox: pool}
}

func runCode(t *testing.T, rc tools.RunCode, env *testkit.Env, actor tools.Actor, script string) (tools.Result, error) {
	t.Helper()
	raw, err := json.Marshal(map[string]string{"script": script})
	if err != nil {
		t.Fatal(err)
	}
	return rc.Run(context.Background(), tools.Call{
		Actor: actor, DB: env.DB, Arguments: raw,
		Now: time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC),
	})
}

func artifactCount(t *testing.T, env *testkit.Env) int {
	t.Helper()
	var n int
	if err := env.DB.QueryRow(`SELECT count(*) FROM artifacts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A script that reaches for anything beyond the sandbox is refused, and
// the model is told why; nothing it wrote before stopping is kept.
func TestRunCodeEscapesRefused(t *testing.T) {
	t.Parallel()
	rc := newRunCode(t, sandbox.PoolConfig{Workers: 2})
	env := testkit.New(t)
	actor := tools.Actor{MemberID: env.Alice.ID, Email: env.Alice.Email, ConversationID: env.Shared.ID}
	for _, tc := range []struct {
		name, script, status, says string
	}{
		{"load", `load("os.star", "system")`, "sandbox_refused", "load"},
		{"path write", "write_file('../../etc/passwd', 'x')", "sandbox_refused", "not a plain file name"},
		{"path read", "read_input('/etc/passwd')", "sandbox_refused", "not a plain file name"},
		{"http", `http.get("https://example.com")`, "script_error", "undefined: http"},
		{"socket", `socket.connect(("10.0.0.1", 80))`, "script_error", "undefined: socket"},
		{"urlopen", `urlopen("https://example.com")`, "script_error", "undefined: urlopen"},
		{"open", `open("/etc/passwd")`, "script_error", "undefined: open"},
		{"os", `os.system("id")`, "script_error", "undefined: os"},
		{"time", `time.now()`, "script_error", "undefined: time"},
		{"infinite loop", "write_file('partial.txt', 'x')\nwhile True:\n    pass", "sandbox_limit", "step"},
		{"huge output", "for i in range(1000000):\n    print('x' * 1000)", "sandbox_limit", "output"},
		{"huge file", "write_file('big.txt', 'x' * 10000000)", "sandbox_limit", "output"},
		{"too many files", "for i in range(100):\n    write_file('f%d.txt' % i, 'x')", "sandbox_limit", "files"},
		{"runtime error", "print(1 // 0)", "script_error", "division by zero"},
		{"syntax error", "def (", "script_error", "script.star"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := artifactCount(t, env)
			res, err := runCode(t, rc, env, actor, tc.script)
			var refusal *tools.Refusal
			if !errors.As(err, &refusal) || refusal.Status != tc.status {
				t.Fatalf("err = %v, want a %s refusal", err, tc.status)
			}
			if !strings.Contains(refusal.Message, tc.says) || len(refusal.Message) > 2100 {
				t.Errorf("message %q does not say %q (or is unbounded)", refusal.Message, tc.says)
			}
			if res.Content != "" || len(res.Artifacts) != 0 {
				t.Errorf("a refused run returned %+v", res)
			}
			if after := artifactCount(t, env); after != before {
				t.Errorf("a refused run stored %d artifacts", after-before)
			}
		})
	}
	for _, args := range []string{`{}`, `{"script":"   "}`, `{"script":1}`, `not json`} {
		if _, err := (tools.RunCode{}).Run(context.Background(), tools.Call{Actor: actor, DB: env.DB, Arguments: json.RawMessage(args)}); !errors.Is(err, tools.ErrBadArguments) {
			t.Errorf("args %s: err = %v, want ErrBadArguments", args, err)
		}
	}
}

// The files a script writes become artifacts the member owns, with the
// sha256 of exactly what was written.
func TestRunCodeFilesBecomeArtifacts(t *testing.T) {
	t.Parallel()
	rc := newRunCode(t, sandbox.PoolConfig{Workers: 2})
	env := testkit.New(t)
	ctx := context.Background()
	if tool, ok := tools.Default().Get("run_code"); !ok || tool.Permission() != "" {
		t.Fatal("run_code is not in the default registry, or needs a permission")
	}
	turnID := env.Submit(t, env.Bob, env.Shared.ID, "crunch the numbers").ID
	actor := tools.Actor{MemberID: env.Bob.ID, Email: env.Bob.Email, ConversationID: env.Shared.ID, TurnID: turnID}
	res, err := runCode(t, rc, env, actor, `
rows = [[i, i * i] for i in range(5)]
write_file("squares.csv", "n,sq\n" + "".join(["%d,%d\n" % (a, b) for a, b in rows]))
write_file("squares.json", json.encode({"squares": [b for _, b in rows]}))
write_file("notes", "made at " + now)
print("wrote", len(rows), "rows")
`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ content, mediaType string }{
		"squares.csv":  {"n,sq\n0,0\n1,1\n2,4\n3,9\n4,16\n", "text/csv"},
		"squares.json": {`{"squares":[0,1,4,9,16]}`, "application/json"},
		"notes":        {"made at 2026-12-02T10:30:00Z", "text/plain"},
	}
	if len(res.Artifacts) != len(want) {
		t.Fatalf("artifacts = %+v", res.Artifacts)
	}
	if !strings.HasPrefix(res.Content, "output:\nwrote 5 rows\nfiles: ") {
		t.Errorf("content = %q", res.Content)
	}
	for _, ref := range res.Artifacts {
		w, ok := want[ref.Name]
		if !ok {
			t.Fatalf("unexpected artifact %+v", ref)
		}
		if ref.SHA256 != testkit.HexSHA([]byte(w.content)) || ref.Size != int64(len(w.content)) || ref.MediaType != w.mediaType {
			t.Errorf("%s: ref %+v, want sha256 %s of %q (%s)", ref.Name, ref, testkit.HexSHA([]byte(w.content)), w.content, w.mediaType)
		}
		if !strings.Contains(res.Content, ref.Name+" (") || !strings.Contains(res.Content, ref.SHA256[:12]) {
			t.Errorf("content %q does not describe %s", res.Content, ref.Name)
		}
		var owner, turn uuid.UUID
		var sum string
		if err := env.DB.QueryRow(`SELECT owner_id, turn_id, sha256 FROM artifacts WHERE id = $1`, ref.ID).Scan(&owner, &turn, &sum); err != nil {
			t.Fatal(err)
		}
		if owner != env.Bob.ID || turn != turnID || sum != ref.SHA256 {
			t.Errorf("%s stored with owner %s, turn %s, sha256 %s", ref.Name, owner, turn, sum)
		}
		_, data, err := resource.ReadArtifact(ctx, env.DB, env.Bob.ID, ref.ID)
		if err != nil || string(data) != w.content {
			t.Errorf("%s reads back %q, %v", ref.Name, data, err)
		}
	}

	// A run's output is bounded before the model reads it.
	res, err = runCode(t, rc, env, actor, "for i in range(600):\n    print('line %d of output' % i)")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) > 4200 || !strings.Contains(res.Content, "more bytes]") || !strings.HasSuffix(res.Content, "files: none") {
		t.Errorf("long output: %d bytes, ends %q", len(res.Content), res.Content[max(0, len(res.Content)-80):])
	}
}

// A pinned artifact the actor may read is a digest-verified script input,
// by its name; one the actor may not read is not there at all.
func TestRunCodeReadsPinnedArtifacts(t *testing.T) {
	t.Parallel()
	rc := newRunCode(t, sandbox.PoolConfig{Workers: 2})
	env := testkit.New(t)
	ctx := context.Background()
	input, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "prices.csv", "", []byte("apple,3\npear,4\n"))
	if err != nil {
		t.Fatal(err)
	}
	private, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "secret.txt", "", []byte("alice's secret"))
	if err != nil {
		t.Fatal(err)
	}
	env.AddRoomReference(t, env.Shared.ID, input.ID, input.SHA256)
	pinned := authority.Manifest{Artifacts: []uuid.UUID{input.ID, private.ID, input.ID}}
	script := `
total = 0
for line in read_input("prices.csv").strip().split("\n"):
    total += int(line.split(",")[1])
print("total", total)
`
	for _, m := range []authority.Member{env.Alice, env.Bob} {
		res, err := runCode(t, rc, env, tools.Actor{MemberID: m.ID, Email: m.Email, ConversationID: env.Shared.ID, Manifest: pinned}, script)
		if err != nil || !strings.Contains(res.Content, "total 7") {
			t.Errorf("%s: %+v, %v; want the input summed", m.Email, res, err)
		}
	}
	// Alice's private artifact is pinned, but Bob may not read it: to his
	// script it does not exist.
	bob := tools.Actor{MemberID: env.Bob.ID, Email: env.Bob.Email, ConversationID: env.Shared.ID, Manifest: pinned}
	var refusal *tools.Refusal
	if _, err := runCode(t, rc, env, bob, `print(read_input("secret.txt"))`); !errors.As(err, &refusal) || refusal.Status != "script_error" ||
		!strings.Contains(refusal.Message, `no input named "secret.txt"`) || strings.Contains(refusal.Message, "alice's secret") {
		t.Errorf("bob reading alice's private artifact: %v", err)
	}
	alice := tools.Actor{MemberID: env.Alice.ID, Email: env.Alice.Email, ConversationID: env.Shared.ID, Manifest: pinned}
	if res, err := runCode(t, rc, env, alice, `print(read_input("secret.txt"))`); err != nil || !strings.Contains(res.Content, "alice's secret") {
		t.Errorf("alice reading her own artifact: %+v, %v", res, err)
	}
	// An artifact that is not pinned is not an input, even to its owner.
	other, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "other.txt", "", []byte("not pinned"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCode(t, rc, env, alice, `print(read_input("other.txt"))`); !errors.As(err, &refusal) || refusal.Status != "script_error" {
		t.Errorf("reading an unpinned artifact (%s): %v", other.ID, err)
	}
}

// A pinned input whose stored content was tampered with refuses the run
// before the script starts.
func TestRunCodeRefusesTamperedInput(t *testing.T) {
	t.Parallel()
	rc := newRunCode(t, sandbox.PoolConfig{Workers: 2})
	env := testkit.New(t)
	ctx := context.Background()
	input, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "balance.txt", "", []byte("balance: 100"))
	if err != nil {
		t.Fatal(err)
	}
	env.TamperArtifact(t, input.ID, []byte("balance: 999"))
	if _, _, err := resource.ReadArtifact(ctx, env.DB, env.Alice.ID, input.ID); !errors.Is(err, resource.ErrDigestMismatch) {
		t.Fatalf("ReadArtifact of tampered content: %v, want ErrDigestMismatch", err)
	}
	before := artifactCount(t, env)
	actor := tools.Actor{MemberID: env.Alice.ID, Email: env.Alice.Email, ConversationID: env.Shared.ID,
		Manifest: authority.Manifest{Artifacts: []uuid.UUID{input.ID}}}
	res, err := runCode(t, rc, env, actor, `write_file("copy.txt", read_input("balance.txt"))`+"\n"+`print(read_input("balance.txt"))`)
	var refusal *tools.Refusal
	if !errors.As(err, &refusal) || refusal.Status != "sandbox_refused" || !strings.Contains(refusal.Message, "digest") {
		t.Fatalf("err = %v, want a sandbox_refused refusal about the digest", err)
	}
	if strings.Contains(refusal.Message, "999") || res.Content != "" || len(res.Artifacts) != 0 {
		t.Errorf("the tampered bytes leaked: %q, %+v", refusal.Message, res)
	}
	if after := artifactCount(t, env); after != before {
		t.Errorf("a refused run stored %d artifacts", after-before)
	}
}

// The sandbox's own bounds reach the model as refusals it can act on: a
// script over its memory ends with sandbox_limit and the next one runs; a
// replica whose workers are all busy (and whose queue is full) refuses
// with sandbox_busy. Without a pool, run_code never runs a script.
func TestRunCodeSandboxBounds(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	actor := tools.Actor{MemberID: env.Alice.ID, Email: env.Alice.Email, ConversationID: env.Shared.ID}

	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		rc := newRunCode(t, sandbox.PoolConfig{Workers: 1})
		_, err := runCode(t, rc, env, actor, `x = "x" * 1000000000`)
		var refusal *tools.Refusal
		if !errors.As(err, &refusal) || refusal.Status != "sandbox_limit" ||
			!strings.Contains(refusal.Message, "memory limit exceeded") || !strings.Contains(refusal.Message, "128 MiB") {
			t.Fatalf("err = %v, want a sandbox_limit refusal about the 128 MiB memory limit", err)
		}
		if res, err := runCode(t, rc, env, actor, "print('after')"); err != nil || !strings.HasPrefix(res.Content, "output:\nafter\n") {
			t.Fatalf("the next run: %+v, %v", res, err)
		}
	})

	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		rc := newRunCode(t, sandbox.PoolConfig{Workers: 1, Queue: -1, WallTime: time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// One step of some seconds (parsing a 2,000,000-digit int) holds
		// the only worker; it retries until it has it.
		held := make(chan error, 1)
		go func() {
			raw, _ := json.Marshal(map[string]string{"script": "x = int('9' * 2000000)"})
			for {
				_, err := rc.Run(ctx, tools.Call{Actor: actor, DB: env.DB, Arguments: raw})
				var refusal *tools.Refusal
				if !errors.As(err, &refusal) || refusal.Status != "sandbox_busy" {
					held <- err
					return
				}
			}
		}()
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := runCode(t, rc, env, actor, "print(1)")
			var refusal *tools.Refusal
			if errors.As(err, &refusal) && refusal.Status == "sandbox_busy" {
				if !strings.Contains(refusal.Message, "try again later") {
					t.Errorf("busy message %q", refusal.Message)
				}
				break
			}
			if err != nil || time.Now().After(deadline) {
				t.Fatalf("never refused as busy; last: %v", err)
			}
		}
		cancel()
		if err := <-held; err == nil || !errors.Is(err, context.Canceled) {
			t.Errorf("the held run: %v, want it cancelled", err)
		}
	})

	t.Run("no pool", func(t *testing.T) {
		t.Parallel()
		_, err := runCode(t, tools.RunCode{}, env, actor, "print(1)")
		var refusal *tools.Refusal
		if err == nil || errors.As(err, &refusal) || !strings.Contains(err.Error(), "no sandbox") {
			t.Fatalf("err = %v, want a plain error: no sandbox pool", err)
		}
	})
}
