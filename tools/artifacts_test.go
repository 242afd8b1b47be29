package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/turngate/turngate/internal/testkit"
	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/tools"
)

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
	if ref.MediaType != "text/markdown" || ref.SHA256 != testkit.HexSHA([]byte("# Summary\n")) || !strings.Contains(res.Content, ref.ID.String()) || len(res.Content) > 300 {
		t.Errorf("result = %+v", res)
	}
	if _, data, err := resource.ReadArtifact(ctx, env.DB, env.Bob.ID, ref.ID); err != nil || string(data) != "# Summary\n" {
		t.Errorf("bob reads his artifact: %q, %v", data, err)
	}
	if _, _, err := resource.ReadArtifact(ctx, env.DB, env.Alice.ID, ref.ID); !errors.Is(err, resource.ErrArtifactNotFound) {
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

// TestCreateArtifactToolReportsStoreRefusals: the store's refusals reach
// the model as a tool reports them — a bad name is ErrBadArguments saying
// why, content over the bound is the too_large refusal — and nothing is
// stored.
func TestCreateArtifactToolReportsStoreRefusals(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := context.Background()
	actor := tools.Actor{MemberID: env.Bob.ID, Email: env.Bob.Email, ConversationID: env.Shared.ID}
	run := func(args map[string]any) error {
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tools.CreateArtifactTool{}.Run(ctx, tools.Call{Actor: actor, DB: env.DB, Arguments: raw})
		return err
	}
	err := run(map[string]any{"name": ".hidden", "content": "x"})
	if !errors.Is(err, tools.ErrBadArguments) || !strings.Contains(err.Error(), "artifact name") || strings.Contains(err.Error(), "invalid artifact") {
		t.Errorf("bad name: %v, want ErrBadArguments naming the artifact name rule", err)
	}
	var refusal *tools.Refusal
	err = run(map[string]any{"name": "big.txt", "content": strings.Repeat("x", resource.MaxArtifactBytes+1)})
	if !errors.As(err, &refusal) || refusal.Status != "too_large" || !strings.HasPrefix(refusal.Message, `artifact "big.txt" is`) {
		t.Errorf("too large: %v, want a too_large refusal", err)
	}
	var n int
	if err := env.DB.QueryRow(`SELECT count(*) FROM artifacts WHERE owner_id = $1`, env.Bob.ID).Scan(&n); err != nil || n != 0 {
		t.Errorf("artifacts stored: %d, %v; want none", n, err)
	}
}
