package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/google/uuid"

	"github.com/turngate/turngate/pg"
	"github.com/turngate/turngate/resource"
)

// describeArtifact is one bounded line about an artifact for the model.
func describeArtifact(ref resource.ArtifactRef) string {
	return fmt.Sprintf("%s (%s, %d bytes, sha256 %s, id %s)", ref.Name, ref.MediaType, ref.Size, shortDigest(ref.SHA256), ref.ID)
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// CreateArtifactTool stores text the model wrote as an artifact owned by
// the member who started the turn.
type CreateArtifactTool struct{}

// CreateArtifactName is the tool's name.
const CreateArtifactName = "create_artifact"

// artifactToolTypes are the media types create_artifact may give an
// artifact: text the model wrote, never a type a browser would render as
// active content.
var artifactToolTypes = map[string]bool{
	"text/plain":       true,
	"text/markdown":    true,
	"text/csv":         true,
	"application/json": true,
}

// Spec implements Tool.
func (CreateArtifactTool) Spec() Spec {
	return Spec{
		Name:        CreateArtifactName,
		Description: "Save text as a file (an artifact) the member owns. Returns the artifact's id, size and sha256.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"name":{"type":"string","description":"file name: 1-128 characters of A-Z a-z 0-9 . _ - not starting with a dot"},` +
			`"content":{"type":"string","description":"the file's text"},` +
			`"mediaType":{"type":"string","enum":["text/plain","text/markdown","text/csv","application/json"],"description":"chosen from the name's extension when omitted"}` +
			`},"required":["name","content"]}`),
	}
}

// Permission implements Tool: membership of the room is enough; the
// artifact is the member's own.
func (CreateArtifactTool) Permission() string { return "" }

// Run implements Tool.
func (CreateArtifactTool) Run(ctx context.Context, call Call) (Result, error) {
	var args struct {
		Name      string  `json:"name"`
		Content   *string `json:"content"`
		MediaType string  `json:"mediaType"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return Result{}, err
	}
	if args.Content == nil {
		return Result{}, fmt.Errorf("%w: content is missing", ErrBadArguments)
	}
	if args.MediaType == "" {
		args.MediaType = resource.MediaTypeFor(args.Name)
	}
	if mt, _, err := mime.ParseMediaType(args.MediaType); err != nil || !artifactToolTypes[mt] {
		return Result{}, fmt.Errorf("%w: mediaType must be one of text/plain, text/markdown, text/csv, application/json", ErrBadArguments)
	}
	ref, err := createArtifact(ctx, call.DB, call.Actor.MemberID, call.Actor.TurnID, args.Name, args.MediaType, []byte(*args.Content))
	if err != nil {
		return Result{}, err
	}
	return Result{Content: "Created artifact " + describeArtifact(ref) + ".", Artifacts: []resource.ArtifactRef{ref}}, nil
}

// createArtifact is resource.CreateArtifact as a tool reports it: a bad
// name or media type is ErrBadArguments, content over the bound the
// too_large refusal the model is told about.
func createArtifact(ctx context.Context, q pg.Querier, owner, turn uuid.UUID, name, mediaType string, content []byte) (resource.ArtifactRef, error) {
	ref, err := resource.CreateArtifact(ctx, q, owner, turn, name, mediaType, content)
	switch {
	case errors.Is(err, resource.ErrInvalid):
		return resource.ArtifactRef{}, fmt.Errorf("%w: %s", ErrBadArguments, detail(err, resource.ErrInvalid))
	case errors.Is(err, resource.ErrTooLarge):
		return resource.ArtifactRef{}, &Refusal{Status: "too_large", Message: detail(err, resource.ErrTooLarge)}
	}
	return ref, err
}

// detail is what err says beyond its sentinel.
func detail(err, sentinel error) string {
	return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
}
