package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/turngate/turngate/resource"
	"github.com/turngate/turngate/sandbox"
)

// RunCode runs a Starlark script in the sandbox, as the member who started
// the turn. The script's inputs are the artifacts the turn's manifest pins
// and the member may read now, digest-verified; the files it writes become
// artifacts the member owns. Its only clock is the call's.
type RunCode struct {
	// Sandbox is the started pool of worker processes scripts run in,
	// which bounds their memory, time and number. Without one the tool
	// fails every call: scripts never run unmetered in the server.
	Sandbox *sandbox.Pool
}

// RunCodeName is the tool's name.
const RunCodeName = "run_code"

// Bounds of what run_code reads and tells the model.
const (
	maxScriptBytes   = 64 << 10
	maxRunOutput     = 4000 // bytes of printed output the model reads
	maxRefusalDetail = 2000 // bytes of a sandbox error the model reads
)

// Spec implements Tool.
func (RunCode) Spec() Spec {
	return Spec{
		Name: RunCodeName,
		Description: "Run a Starlark (Python-like) script in a sandbox with no network, filesystem or clock. " +
			"print() output is returned; write_file(name, content) saves a file as an artifact of the member; " +
			"read_input(name) reads an artifact pinned to the turn, by its name; json and math are predeclared, load is not available.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"script":{"type":"string","description":"the Starlark source"}},"required":["script"]}`),
	}
}

// Permission implements Tool: membership of the room is enough; the
// script reads only what the member may read and writes only the
// member's own artifacts.
func (RunCode) Permission() string { return "" }

// errNoSandbox is RunCode's error without a pool: the server's wiring is
// wrong, not the script.
var errNoSandbox = errors.New("run_code: no sandbox pool configured")

// Run implements Tool.
func (rc RunCode) Run(ctx context.Context, call Call) (Result, error) {
	var args struct {
		Script string `json:"script"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(args.Script) == "" {
		return Result{}, fmt.Errorf("%w: script is empty", ErrBadArguments)
	}
	if len(args.Script) > maxScriptBytes {
		return Result{}, fmt.Errorf("%w: script is %d bytes; the limit is %d", ErrBadArguments, len(args.Script), maxScriptBytes)
	}
	if rc.Sandbox == nil {
		return Result{}, errNoSandbox
	}
	inputs, read, err := runInputs(ctx, call)
	if err != nil {
		return Result{}, err
	}
	// What the script prints may quote its inputs: the result derives
	// from what the turns that made them drew on.
	docs, err := resource.ArtifactEvidence(ctx, call.DB, read)
	if err != nil {
		return Result{}, fmt.Errorf("run_code: %w", err)
	}
	out, err := rc.Sandbox.Run(ctx, sandbox.Request{Script: args.Script, Inputs: inputs, Now: call.Now})
	if err != nil {
		if ctx.Err() != nil {
			// The call itself was cancelled: nothing for the model.
			return Result{}, fmt.Errorf("run_code: %w", err)
		}
		return Result{}, sandboxRefusal(err)
	}
	res := Result{Documents: docs}
	for _, f := range out.Files {
		ref, err := createArtifact(ctx, call.DB, call.Actor.MemberID, call.Actor.TurnID, f.Name, resource.MediaTypeFor(f.Name), f.Data)
		if err != nil {
			return Result{}, fmt.Errorf("run_code: save %q: %w", f.Name, err)
		}
		res.Artifacts = append(res.Artifacts, ref)
	}
	res.Content = describeRun(out.Output, res.Artifacts)
	return res, nil
}

// runInputs reads the artifacts the manifest pins that the actor may read
// now — in a shared room, only those every member may read what they
// derive from — digest-verified, as sandbox inputs named by their
// artifact names, and says which artifacts it read. One the actor may not
// read is left out, exactly like one that does not exist; one whose
// content fails its digest check refuses the call.
func runInputs(ctx context.Context, call Call) ([]sandbox.Input, []uuid.UUID, error) {
	var inputs []sandbox.Input
	var read []uuid.UUID
	seen := map[uuid.UUID]bool{}
	names := map[string]bool{}
	for _, id := range call.Actor.Manifest.Artifacts {
		if seen[id] {
			continue
		}
		seen[id] = true
		ref, data, err := resource.ReadArtifact(ctx, call.DB, call.Actor.MemberID, id)
		if err == nil && call.Actor.Shared {
			// In a shared room the script's output reaches the model
			// context of every member: a file drawn from what one of them
			// may not read is left out, as if it did not exist.
			var shared bool
			if shared, err = resource.AudienceMayRead(ctx, call.DB, id, call.Actor.ConversationID); err == nil && !shared {
				err = resource.ErrArtifactNotFound
			}
		}
		switch {
		case errors.Is(err, resource.ErrArtifactNotFound):
			continue
		case errors.Is(err, resource.ErrDigestMismatch):
			return nil, nil, &Refusal{Status: "sandbox_refused", Message: fmt.Sprintf(
				"input artifact %s failed its digest check: its content is not what was recorded, so the script was not run", id)}
		case err != nil:
			return nil, nil, fmt.Errorf("run_code: input %s: %w", id, err)
		}
		read = append(read, id)
		name := ref.Name
		if names[name] {
			// Two pinned artifacts share a name: the later one is
			// read_input("<id>-<name>"), cut to the name limit.
			name = id.String() + "-" + name
			if len(name) > resource.MaxArtifactName {
				name = name[:resource.MaxArtifactName]
			}
		}
		if names[name] || !resource.ValidArtifactName(name) {
			name = id.String()
		}
		names[name] = true
		inputs = append(inputs, sandbox.Input{Name: name, Data: data, SHA256: ref.SHA256})
	}
	return inputs, read, nil
}

// sandboxRefusal tells the model why its script did not finish.
func sandboxRefusal(err error) error {
	status := ""
	switch {
	case errors.Is(err, sandbox.ErrRefused), errors.Is(err, sandbox.ErrInputDigest):
		status = "sandbox_refused"
	case errors.Is(err, sandbox.ErrSteps), errors.Is(err, sandbox.ErrOutput), errors.Is(err, sandbox.ErrWallTime),
		errors.Is(err, sandbox.ErrMemory):
		status = "sandbox_limit"
	case errors.Is(err, sandbox.ErrBusy):
		// Too many scripts on this replica right now; the model may try
		// again later, or answer without running code.
		status = "sandbox_busy"
	case errors.Is(err, sandbox.ErrScript):
		status = "script_error"
	default:
		// Not the script's doing (a request the backend built badly).
		return fmt.Errorf("run_code: %w", err)
	}
	return &Refusal{Status: status, Message: clipBytes(err.Error(), maxRefusalDetail)}
}

// describeRun is what the model reads of a finished run.
func describeRun(output string, files []resource.ArtifactRef) string {
	var b strings.Builder
	b.WriteString("output:\n")
	b.WriteString(clipBytes(output, maxRunOutput))
	if output != "" && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	b.WriteString("files:")
	if len(files) == 0 {
		b.WriteString(" none")
	}
	for i, f := range files {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(" " + describeArtifact(f))
	}
	return b.String()
}

// clipBytes cuts s to at most n bytes on a rune boundary, saying how much
// was left out.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… [%d more bytes]", s[:cut], len(s)-cut)
}
