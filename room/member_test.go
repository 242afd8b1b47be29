package room_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/resource"
)

// Invitation-time reconciliation: a file a member made in a room's turn
// while outside it has no reference; inviting them back links it, through
// the same resolver and linking step as post-run linking.
func TestInvitationReconcilesFiles(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	carol := env.NewMember(t, "carol@example.com")
	if _, err := env.Rooms.AddMember(ctx, env.Alice, env.Shared.ID.String(), carol.Email); err != nil {
		t.Fatal(err)
	}
	tt := env.Submit(t, carol, env.Shared.ID, "make a file")
	if _, err := env.Rooms.RemoveMember(ctx, env.Alice, env.Shared.ID.String(), carol.Email); err != nil {
		t.Fatal(err)
	}
	// Her file from that turn settles while she is out: no reference.
	ref, err := resource.CreateArtifact(ctx, env.Client, carol.ID, tt.ID, "out.txt", "text/plain", []byte("made while out"))
	if err != nil {
		t.Fatal(err)
	}
	if linked, err := resource.LinkToRoom(ctx, env.Client, env.Shared.Channel, []uuid.UUID{ref.ID}); err != nil || len(linked) != 0 {
		t.Fatalf("linked %+v (%v) for a member who is out", linked, err)
	}
	if _, err := env.Rooms.AddMember(ctx, env.Alice, env.Shared.ID.String(), carol.Email); err != nil {
		t.Fatal(err)
	}
	var refs int
	if err := env.DB.QueryRow(`SELECT count(*) FROM room_resources WHERE conversation_id = $1 AND artifact_id = $2 AND digest = $3`,
		env.Shared.ID, ref.ID, ref.SHA256).Scan(&refs); err != nil || refs != 1 {
		t.Fatalf("after the invitation: %d references (%v), want 1", refs, err)
	}
	if _, _, err := resource.ReadArtifact(ctx, env.Client, env.Bob.ID, ref.ID); err != nil {
		t.Fatalf("bob reads the reconciled file: %v", err)
	}
}
