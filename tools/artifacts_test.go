package tools_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/tools"
)

func hexSHA(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// tamperArtifact rewrites an artifact's stored content behind the
// immutability trigger, in the test's own database: what a corrupted disk
// or a rogue writer would leave. The new content must keep the size.
func tamperArtifact(t *testing.T, db *sql.DB, id uuid.UUID, content []byte) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, stmt := range []struct {
		q    string
		args []any
	}{
		{`ALTER TABLE artifacts DISABLE TRIGGER artifacts_immutable`, nil},
		{`UPDATE artifacts SET content = $2 WHERE id = $1`, []any{id, content}},
		{`ALTER TABLE artifacts ENABLE TRIGGER artifacts_immutable`, nil},
	} {
		if _, err := tx.Exec(stmt.q, stmt.args...); err != nil {
			t.Fatalf("tamper: %s: %v", stmt.q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// addRoomReference makes an artifact part of a room, as a settled tool
// does, with the given digest.
func addRoomReference(t *testing.T, db *sql.DB, room, artifact uuid.UUID, digest string) {
	t.Helper()
	if _, err := db.Exec(`INSERT INTO room_resources (id, conversation_id, artifact_id, digest) VALUES ($1, $2, $3, $4)`,
		uuid.New(), room, artifact, digest); err != nil {
		t.Fatal(err)
	}
}

func TestCreateArtifact(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	content := []byte("a,b\n1,2\n")
	ref, err := tools.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "table.csv", "", content)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Name != "table.csv" || ref.MediaType != "text/csv" || ref.Size != int64(len(content)) || ref.SHA256 != hexSHA(content) {
		t.Fatalf("ref = %+v", ref)
	}
	var owner uuid.UUID
	var sum string
	var stored []byte
	if err := env.DB.QueryRow(`SELECT owner_id, sha256, content FROM artifacts WHERE id = $1`, ref.ID).Scan(&owner, &sum, &stored); err != nil {
		t.Fatal(err)
	}
	if owner != env.Alice.ID || sum != hexSHA(content) || !bytes.Equal(stored, content) {
		t.Fatalf("stored owner %s sha256 %s content %q", owner, sum, stored)
	}

	for _, name := range []string{"", ".hidden", "..", "a/b", "../etc", "sp ace", "naïve.txt", strings.Repeat("x", 129)} {
		if _, err := tools.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, name, "", []byte("x")); !errors.Is(err, tools.ErrBadArguments) {
			t.Errorf("name %q: err = %v, want ErrBadArguments", name, err)
		}
	}
	if _, err := tools.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, strings.Repeat("x", 128), "", []byte("x")); err != nil {
		t.Errorf("a 128-character name: %v", err)
	}
	if _, err := tools.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "x.txt", "not a type", []byte("x")); !errors.Is(err, tools.ErrBadArguments) {
		t.Errorf("bad media type: err = %v, want ErrBadArguments", err)
	}
	var refusal *tools.Refusal
	if _, err := tools.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "big.bin", "", make([]byte, tools.MaxArtifactBytes+1)); !errors.As(err, &refusal) || refusal.Status != "too_large" {
		t.Errorf("too large: err = %v, want a too_large refusal", err)
	}
	if _, err := tools.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "max.bin", "", make([]byte, tools.MaxArtifactBytes)); err != nil {
		t.Errorf("exactly MaxArtifactBytes: %v", err)
	}
}

// ReadArtifact re-authorises at read time: the owner, and current members
// of a room holding a reference, read it; a removed member and a stranger
// get the same not-found as for an artifact that does not exist.
func TestReadArtifactAuthorisation(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	carol := env.NewMember(t, "carol@example.com")
	if _, err := env.Rooms.AddMember(ctx, env.Alice, env.Shared.ID.String(), carol.Email); err != nil {
		t.Fatal(err)
	}
	stranger := env.NewMember(t, "eve@example.com")

	content := []byte("shared findings")
	shared, err := tools.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "findings.md", "", content)
	if err != nil {
		t.Fatal(err)
	}
	addRoomReference(t, env.DB, env.Shared.ID, shared.ID, shared.SHA256)
	private, err := tools.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "private.txt", "", []byte("alice only"))
	if err != nil {
		t.Fatal(err)
	}
	badRef, err := tools.CreateArtifact(ctx, env.DB, env.Bob.ID, uuid.Nil, "misreferenced.txt", "", []byte("bob's"))
	if err != nil {
		t.Fatal(err)
	}
	addRoomReference(t, env.DB, env.Shared.ID, badRef.ID, hexSHA([]byte("something else")))

	check := func(t *testing.T, viewer uuid.UUID, id uuid.UUID, want error) {
		t.Helper()
		ref, data, err := tools.ReadArtifact(ctx, env.DB, viewer, id)
		switch {
		case want == nil && err != nil:
			t.Errorf("read: %v, want the artifact", err)
		case want == nil:
			if ref.ID != id || ref.SHA256 != hexSHA(data) {
				t.Errorf("read %+v with content %q", ref, data)
			}
		case !errors.Is(err, want) || data != nil || ref != (tools.ArtifactRef{}):
			t.Errorf("read = %+v, %q, %v; want %v and nothing", ref, data, err, want)
		}
		// StatArtifact authorises the same way (it verifies no content).
		_, err = tools.StatArtifact(ctx, env.DB, viewer, id)
		if errors.Is(want, tools.ErrArtifactNotFound) != errors.Is(err, tools.ErrArtifactNotFound) {
			t.Errorf("stat: %v, want not found = %v", err, errors.Is(want, tools.ErrArtifactNotFound))
		}
	}
	for _, tc := range []struct {
		name   string
		viewer uuid.UUID
		id     uuid.UUID
		want   error
	}{
		{"owner", env.Alice.ID, shared.ID, nil},
		{"owner, private", env.Alice.ID, private.ID, nil},
		{"room member", env.Bob.ID, shared.ID, nil},
		{"room member, carol", carol.ID, shared.ID, nil},
		{"room member, not referenced", env.Bob.ID, private.ID, tools.ErrArtifactNotFound},
		{"stranger", stranger.ID, shared.ID, tools.ErrArtifactNotFound},
		{"stranger, private", stranger.ID, private.ID, tools.ErrArtifactNotFound},
		{"nonexistent", env.Alice.ID, uuid.New(), tools.ErrArtifactNotFound},
		{"nil viewer", uuid.Nil, shared.ID, tools.ErrArtifactNotFound},
		{"reference digest differs, owner", env.Bob.ID, badRef.ID, tools.ErrDigestMismatch},
		{"reference digest differs, member", env.Alice.ID, badRef.ID, tools.ErrDigestMismatch},
		{"reference digest differs, stranger", stranger.ID, badRef.ID, tools.ErrArtifactNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, tc.viewer, tc.id, tc.want) })
	}

	// Removing carol from the room takes the artifact away from her at
	// once; the others keep it.
	if _, err := env.Rooms.RemoveMember(ctx, env.Alice, env.Shared.ID.String(), carol.Email); err != nil {
		t.Fatal(err)
	}
	t.Run("removed member", func(t *testing.T) { check(t, carol.ID, shared.ID, tools.ErrArtifactNotFound) })
	t.Run("member after removal", func(t *testing.T) { check(t, env.Bob.ID, shared.ID, nil) })
}

// Content that no longer matches its recorded sha256 is never returned.
func TestReadArtifactDigestMismatch(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	ref, err := tools.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "ledger.csv", "", []byte("total,100\n"))
	if err != nil {
		t.Fatal(err)
	}
	addRoomReference(t, env.DB, env.Shared.ID, ref.ID, ref.SHA256)
	tamperArtifact(t, env.DB, ref.ID, []byte("total,999\n"))
	for _, viewer := range []uuid.UUID{env.Alice.ID, env.Bob.ID} {
		got, data, err := tools.ReadArtifact(ctx, env.DB, viewer, ref.ID)
		if !errors.Is(err, tools.ErrDigestMismatch) || data != nil || got != (tools.ArtifactRef{}) {
			t.Errorf("viewer %s: read = %+v, %q, %v; want ErrDigestMismatch and no bytes", viewer, got, data, err)
		}
	}
}

func TestCreateArtifactTool(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	tool := tools.CreateArtifactTool{}
	if tool.Spec().Name != "create_artifact" || tool.Permission() != "" {
		t.Fatalf("spec %s, permission %q", tool.Spec().Name, tool.Permission())
	}
	if _, ok := tools.Default().Get("create_artifact"); !ok {
		t.Fatal("create_artifact is not in the default registry")
	}
	actor := tools.Actor{MemberID: env.Bob.ID, Email: env.Bob.Email, ConversationID: env.Shared.ID}
	run := func(args any) (tools.Result, error) {
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		return tool.Run(ctx, tools.Call{Actor: actor, DB: env.DB, Arguments: raw})
	}
	res, err := run(map[string]any{"name": "summary.md", "content": "# Summary\n"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Artifacts) != 1 {
		t.Fatalf("artifacts = %+v", res.Artifacts)
	}
	ref := res.Artifacts[0]
	if ref.MediaType != "text/markdown" || ref.SHA256 != hexSHA([]byte("# Summary\n")) || !strings.Contains(res.Content, ref.ID.String()) || len(res.Content) > 300 {
		t.Errorf("result = %+v", res)
	}
	if _, data, err := tools.ReadArtifact(ctx, env.DB, env.Bob.ID, ref.ID); err != nil || string(data) != "# Summary\n" {
		t.Errorf("bob reads his artifact: %q, %v", data, err)
	}
	if _, _, err := tools.ReadArtifact(ctx, env.DB, env.Alice.ID, ref.ID); !errors.Is(err, tools.ErrArtifactNotFound) {
		t.Errorf("alice reads bob's unshared artifact: %v", err)
	}
	res, err = run(map[string]any{"name": "data", "content": "{}", "mediaType": "application/json"})
	if err != nil || res.Artifacts[0].MediaType != "application/json" {
		t.Errorf("explicit media type: %+v, %v", res, err)
	}
	for _, args := range []map[string]any{
		{"name": "page.html", "content": "<script>", "mediaType": "text/html"},
		{"name": "../x", "content": "x"},
		{"name": "x.txt"},
		{"content": "x"},
	} {
		if _, err := run(args); !errors.Is(err, tools.ErrBadArguments) {
			t.Errorf("%v: err = %v, want ErrBadArguments", args, err)
		}
	}
}
