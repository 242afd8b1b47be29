package resource_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/internal/dbtest"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/migrations"
	"github.com/turngate/turngate/resource"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m, migrations.Apply)) }

func TestCreateArtifact(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	content := []byte("a,b\n1,2\n")
	ref, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "table.csv", "", content)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Name != "table.csv" || ref.MediaType != "text/csv" || ref.Size != int64(len(content)) || ref.SHA256 != testkit.HexSHA(content) {
		t.Fatalf("ref = %+v", ref)
	}
	var owner uuid.UUID
	var sum string
	var stored []byte
	if err := env.DB.QueryRow(`SELECT owner_id, sha256, content FROM artifacts WHERE id = $1`, ref.ID).Scan(&owner, &sum, &stored); err != nil {
		t.Fatal(err)
	}
	if owner != env.Alice.ID || sum != testkit.HexSHA(content) || !bytes.Equal(stored, content) {
		t.Fatalf("stored owner %s sha256 %s content %q", owner, sum, stored)
	}

	for _, name := range []string{"", ".hidden", "..", "a/b", "../etc", "sp ace", "naïve.txt", strings.Repeat("x", 129)} {
		if _, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, name, "", []byte("x")); !errors.Is(err, resource.ErrInvalid) {
			t.Errorf("name %q: err = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, strings.Repeat("x", 128), "", []byte("x")); err != nil {
		t.Errorf("a 128-character name: %v", err)
	}
	if _, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "x.txt", "not a type", []byte("x")); !errors.Is(err, resource.ErrInvalid) {
		t.Errorf("bad media type: err = %v, want ErrInvalid", err)
	}
	if _, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "big.bin", "", make([]byte, resource.MaxArtifactBytes+1)); !errors.Is(err, resource.ErrTooLarge) {
		t.Errorf("too large: err = %v, want ErrTooLarge", err)
	}
	if _, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "max.bin", "", make([]byte, resource.MaxArtifactBytes)); err != nil {
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
	shared, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "findings.md", "", content)
	if err != nil {
		t.Fatal(err)
	}
	env.AddRoomReference(t, env.Shared.ID, shared.ID, shared.SHA256)
	private, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "private.txt", "", []byte("alice only"))
	if err != nil {
		t.Fatal(err)
	}
	badRef, err := resource.CreateArtifact(ctx, env.DB, env.Bob.ID, uuid.Nil, "misreferenced.txt", "", []byte("bob's"))
	if err != nil {
		t.Fatal(err)
	}
	env.AddRoomReference(t, env.Shared.ID, badRef.ID, testkit.HexSHA([]byte("something else")))

	check := func(t *testing.T, viewer uuid.UUID, id uuid.UUID, want error) {
		t.Helper()
		ref, data, err := resource.ReadArtifact(ctx, env.DB, viewer, id)
		switch {
		case want == nil && err != nil:
			t.Errorf("read: %v, want the artifact", err)
		case want == nil:
			if ref.ID != id || ref.SHA256 != testkit.HexSHA(data) {
				t.Errorf("read %+v with content %q", ref, data)
			}
		case !errors.Is(err, want) || data != nil || ref != (resource.ArtifactRef{}):
			t.Errorf("read = %+v, %q, %v; want %v and nothing", ref, data, err, want)
		}
		// StatArtifact authorises the same way (it verifies no content).
		_, err = resource.StatArtifact(ctx, env.DB, viewer, id)
		if errors.Is(want, resource.ErrArtifactNotFound) != errors.Is(err, resource.ErrArtifactNotFound) {
			t.Errorf("stat: %v, want not found = %v", err, errors.Is(want, resource.ErrArtifactNotFound))
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
		{"room member, not referenced", env.Bob.ID, private.ID, resource.ErrArtifactNotFound},
		{"stranger", stranger.ID, shared.ID, resource.ErrArtifactNotFound},
		{"stranger, private", stranger.ID, private.ID, resource.ErrArtifactNotFound},
		{"nonexistent", env.Alice.ID, uuid.New(), resource.ErrArtifactNotFound},
		{"nil viewer", uuid.Nil, shared.ID, resource.ErrArtifactNotFound},
		{"reference digest differs, owner", env.Bob.ID, badRef.ID, resource.ErrDigestMismatch},
		{"reference digest differs, member", env.Alice.ID, badRef.ID, resource.ErrDigestMismatch},
		{"reference digest differs, stranger", stranger.ID, badRef.ID, resource.ErrArtifactNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, tc.viewer, tc.id, tc.want) })
	}

	// Removing carol from the room takes the artifact away from her at
	// once; the others keep it.
	if _, err := env.Rooms.RemoveMember(ctx, env.Alice, env.Shared.ID.String(), carol.Email); err != nil {
		t.Fatal(err)
	}
	t.Run("removed member", func(t *testing.T) { check(t, carol.ID, shared.ID, resource.ErrArtifactNotFound) })
	t.Run("member after removal", func(t *testing.T) { check(t, env.Bob.ID, shared.ID, nil) })
}

// Content that no longer matches its recorded sha256 is never returned.
func TestReadArtifactDigestMismatch(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	ref, err := resource.CreateArtifact(ctx, env.DB, env.Alice.ID, uuid.Nil, "ledger.csv", "", []byte("total,100\n"))
	if err != nil {
		t.Fatal(err)
	}
	env.AddRoomReference(t, env.Shared.ID, ref.ID, ref.SHA256)
	env.TamperArtifact(t, ref.ID, []byte("total,999\n"))
	for _, viewer := range []uuid.UUID{env.Alice.ID, env.Bob.ID} {
		got, data, err := resource.ReadArtifact(ctx, env.DB, viewer, ref.ID)
		if !errors.Is(err, resource.ErrDigestMismatch) || data != nil || got != (resource.ArtifactRef{}) {
			t.Errorf("viewer %s: read = %+v, %q, %v; want ErrDigestMismatch and no bytes", viewer, got, data, err)
		}
	}
}
