package callback

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/turngate/turngate/journal"
	"github.com/turngate/turngate/lease"
	"github.com/turngate/turngate/outcome"
	"github.com/turngate/turngate/runtime"
	"github.com/turngate/turngate/tools"
)

// storedCheckpoint is what a turn's checkpoint column holds: the
// controller's state, and the usage the backend counted up to it.
type storedCheckpoint struct {
	State runtime.Checkpoint `json:"state"`
	Usage outcome.Usage      `json:"usage"`
	// Evidence and Artifacts are what the turn's tools gathered and made
	// up to the checkpoint: an answer of a replacement attempt may cite
	// and reference them.
	Evidence  []tools.Citation         `json:"evidence,omitempty"`
	Artifacts []journal.AnswerArtifact `json:"artifacts,omitempty"`
}

// Checkpoint stores the run's progress on the turn, fenced by the lease
// token: a run that no longer owns the turn writes nothing. A compaction
// is journaled with it.
func (h *Host) Checkpoint(ctx context.Context, cp runtime.Checkpoint) error {
	if err := h.check(cp.Run); err != nil {
		return err
	}
	h.mu.Lock()
	stored := storedCheckpoint{State: cp, Usage: h.usage, Artifacts: h.artifacts}
	for _, id := range h.evidence.IDs() {
		stored.Evidence = append(stored.Evidence, h.lineage[id])
	}
	h.mu.Unlock()
	raw, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	c := h.claim
	drafts := h.takeHeld()
	var summary *lease.RoomSummary
	if comp := cp.Compaction; comp != nil {
		p := journal.CompactionPayload{Summarised: comp.Summarised, TokensBefore: comp.TokensBefore, TokensAfter: comp.TokensAfter}
		summary = h.roomSummaryOf(cp)
		if summary != nil {
			p.Through, p.Turns = summary.Through, summary.Turns
		}
		drafts = append(drafts, journal.Draft{Kind: journal.KindCompaction, TurnID: h.turnID(), Attempt: c.Turn.Attempt, Payload: p})
	}
	drafts = append(drafts, journal.Draft{Kind: journal.KindCheckpoint, TurnID: h.turnID(), Attempt: c.Turn.Attempt,
		Payload: journal.CheckpointPayload{Steps: cp.Steps, ToolCalls: cp.ToolCalls, Messages: len(cp.Messages)}})
	return h.deps.Store.Checkpoint(ctx, lease.CheckpointParams{Claim: c, Checkpoint: raw, Drafts: drafts, Summary: summary})
}

// roomSummaryOf is the room summary a compaction checkpoint carries: only
// the text this host's own compaction step over the room's history
// returned, claimed for the position that history ends at. Anything else
// the runtime reports stays the turn's.
func (h *Host) roomSummaryOf(cp runtime.Checkpoint) *lease.RoomSummary {
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := h.roomSummary
	if rs == nil || cp.Compaction.Through != rs.Through || cp.Compacted == nil || cp.Compacted.Content != rs.Text {
		return nil
	}
	h.roomSummary = nil
	return rs
}

// Steering claims the steer commands waiting for the turn and journals
// their delivery (steer_delivered), atomically and fenced by the lease
// token: only the run that owns the turn delivers, each command once.
func (h *Host) Steering(ctx context.Context, run runtime.RunRef) ([]runtime.Steer, error) {
	if err := h.check(run); err != nil {
		return nil, err
	}
	// Text a previous step held back goes out ahead of the deliveries.
	if err := h.flushHeld(ctx); err != nil {
		return nil, err
	}
	claimed, err := h.deps.Store.ClaimSteers(ctx, h.claim)
	if err != nil {
		return nil, err
	}
	steers := make([]runtime.Steer, 0, len(claimed))
	for _, st := range claimed {
		steers = append(steers, runtime.Steer{ID: st.ID.String(), Text: st.Text})
	}
	return steers, nil
}

// Resume gives a replacement attempt what its predecessors left: the last
// checkpoint, the usage counted up to it, and steering an earlier attempt
// claimed after that checkpoint (delivered once, in the journal; applied
// by whichever attempt finishes the turn).
func (h *Host) Resume(ctx context.Context, contract *runtime.Contract) error {
	t := h.claim.Turn
	applied := []string{}
	if len(t.Checkpoint) > 0 {
		var sc storedCheckpoint
		if err := json.Unmarshal(t.Checkpoint, &sc); err != nil {
			return fmt.Errorf("decode checkpoint of %s: %w", t.ID, err)
		}
		state := sc.State
		state.Run = contract.Run
		contract.Resume = &state
		h.usage = sc.Usage
		h.remember(sc.Evidence)
		h.artifacts = sc.Artifacts
		applied = state.Steers
	}
	if t.Attempt <= 1 {
		return nil
	}
	delivered, err := h.deps.Store.DeliveredSteers(ctx, h.claim)
	if err != nil {
		return err
	}
	for _, st := range delivered {
		if id := st.ID.String(); !slices.Contains(applied, id) {
			contract.Steering = append(contract.Steering, runtime.Steer{ID: id, Text: st.Text})
		}
	}
	return nil
}
