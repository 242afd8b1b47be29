package tools_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/authority"
	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/room"
)

// One resolver maps every name of a room — UUID, WEB_ channel, public key,
// each optionally task-suffixed — to that room; only complete names and
// the explicit task prefix match. Two rooms with near-identical names
// never resolve to each other, and never share a file.
func TestScopeResolverAndSimilarRooms(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	a, err := env.Rooms.Create(ctx, env.Alice, room.NewInput{Title: "Launch", Kind: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Rooms.Create(ctx, env.Bob, room.NewInput{Title: "Launch 2", Kind: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	// B's names are A's with one more character.
	if _, err := env.DB.Exec(`UPDATE conversations SET channel = $2, public_key = $3 WHERE id = $1`, b.ID, a.Channel+"0", a.PublicKey+"0"); err != nil {
		t.Fatal(err)
	}
	task := uuid.New()
	if _, err := env.DB.Exec(`INSERT INTO tasks (id, owner_id, conversation_id, title) VALUES ($1, $2, $3, 'ship it')`, task, env.Alice.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	sep := authority.TaskSeparator
	for _, tc := range []struct {
		ref  string
		room uuid.UUID
		task uuid.UUID
	}{
		{a.ID.String(), a.ID, uuid.Nil},
		{a.Channel, a.ID, uuid.Nil},
		{a.PublicKey, a.ID, uuid.Nil},
		{a.Channel + sep + task.String(), a.ID, task},
		{a.PublicKey + sep + task.String(), a.ID, task},
		{a.ID.String() + sep + task.String(), a.ID, task},
		{a.Channel + "0", b.ID, uuid.Nil},
		{a.PublicKey + "0", b.ID, uuid.Nil},
		// Nothing else matches.
		{a.Channel[:len(a.Channel)-1], uuid.Nil, uuid.Nil},
		{" " + a.Channel, uuid.Nil, uuid.Nil},
		{strings.ToLower(a.Channel), uuid.Nil, uuid.Nil},
		{a.Channel + "-task-" + task.String(), uuid.Nil, uuid.Nil},
		{a.Channel + "#TASK:" + task.String(), uuid.Nil, uuid.Nil},
		{a.Channel + sep + uuid.NewString(), uuid.Nil, uuid.Nil},
		{a.Channel + "0" + sep + task.String(), uuid.Nil, uuid.Nil}, // A's task under B's name
		{a.Channel + sep + task.String()[:35], uuid.Nil, uuid.Nil},
	} {
		s, err := authority.Resolve(ctx, env.DB, tc.ref)
		if tc.room == uuid.Nil {
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != errcode.NotFound {
				t.Errorf("Resolve(%q) = %+v, %v; want NOT_FOUND", tc.ref, s, err)
			}
			continue
		}
		if err != nil || s.Room != tc.room || s.Task.UUID != tc.task {
			t.Errorf("Resolve(%q) = %+v, %v; want room %s task %s", tc.ref, s, err, tc.room, tc.task)
		}
	}

	// A file referenced in A is A's alone: B's members cannot read it.
	ref, err := resource.CreateArtifact(ctx, env.Client, env.Alice.ID, uuid.Nil, "plan.md", "text/markdown", []byte("# plan"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(`INSERT INTO room_resources (id, conversation_id, artifact_id, digest) VALUES ($1, $2, $3, $4)`, uuid.New(), a.ID, ref.ID, ref.SHA256); err != nil {
		t.Fatal(err)
	}
	if _, _, err := resource.ReadArtifact(ctx, env.Client, env.Bob.ID, ref.ID); !errors.Is(err, resource.ErrArtifactNotFound) {
		t.Fatalf("a member of the similarly named room reads A's file: %v", err)
	}
	var shared int
	if err := env.DB.QueryRow(`SELECT count(*) FROM room_resources WHERE conversation_id = $1`, b.ID).Scan(&shared); err != nil || shared != 0 {
		t.Fatalf("room B holds %d references (%v)", shared, err)
	}
}
