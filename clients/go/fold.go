package client

import "encoding/json"

// ToolView is a tool call as a room sees it.
type ToolView struct {
	CallID, Name string
	Arguments    json.RawMessage
	// Status is empty while the backend runs it; then ok, or why not.
	Status string
}

// ApprovalView is an approval as a room sees it.
type ApprovalView struct {
	ApprovalID, Tool string
	Arguments        json.RawMessage
	State            ApprovalState
}

// SteerView is a steering instruction and what became of it.
type SteerView struct {
	CommandID, Text string
	State           CommandState
}

// InterruptedAnswer is the partial answer of an attempt a crash cut off:
// the run's next attempt wrote its answer again from the start, so this
// text is not part of the answer and is shown, if at all, as interrupted.
type InterruptedAnswer struct {
	Attempt int
	Text    string
}

// TurnView is a turn as the room's journal tells it so far.
type TurnView struct {
	ID       string
	Position int // its turn_accepted entry's position: its place in the lane
	AuthorID string
	Author   string
	Input    string
	State    TurnState
	Attempt  int
	// Answer is the answer so far: the streamed text of the current
	// attempt's current draft, then the published answer (Answered). Text
	// a new attempt or draft replaces is never joined to it: a draft the
	// run discarded (a steer delivered, or a tool requested, after it) is
	// dropped, and an interrupted attempt's partial answer moves to
	// Interrupted.
	Answer   string
	Answered bool
	// Interrupted are the partial answers of earlier attempts a crash cut
	// off, oldest first.
	Interrupted []InterruptedAnswer
	// Withheld: the turn drew on a document this viewer may not read now
	// (they joined later, or lost access), or its answer was withheld
	// from the whole room. Answer is then the server's withheld notice,
	// never the text of an earlier view, and the terminal reason
	// AUDIENCE_WITHHELD.
	Withheld  bool
	Citations []*EntryFieldsAnswerTurnAnswerCitationsCitation
	Artifacts []*EntryFieldsAnswerTurnAnswerArtifactsAnswerArtifact
	Tools     []ToolView
	Approvals []ApprovalView
	Steers    []SteerView
	// QueuePosition, while QUEUED, is how many unfinished turns are ahead
	// of it in the room's lane (0: next); -1 otherwise.
	QueuePosition int
	Terminal      *EntryFieldsTerminalTurnTerminal

	// draftAt is where the current draft starts in the attempt's answer;
	// restart: the next delta starts a new draft. The server counts
	// offsets from the attempt's start, through every step; only the
	// run's last step is the answer.
	draftAt int
	restart bool
}

// newAttempt starts attempt: the partial answer of the attempt before it,
// cut off by a crash, is kept apart as interrupted, never joined to the
// new attempt's text, which starts again at offset 0.
func (t *TurnView) newAttempt(attempt int) {
	if !t.Answered {
		if t.Answer != "" {
			t.Interrupted = append(t.Interrupted, InterruptedAnswer{Attempt: t.Attempt, Text: t.Answer})
		}
		t.Answer = ""
	}
	t.Attempt, t.draftAt, t.restart = attempt, 0, false
}

// discardDraft drops the current draft: the run's next step writes the
// answer anew.
func (t *TurnView) discardDraft() {
	if !t.Answered {
		t.Answer, t.restart = "", true
	}
}

// Ended reports whether the turn has its terminal.
func (t *TurnView) Ended() bool { return t.Terminal != nil }

// Fold folds journal entries, in position order, into turn views. An
// entry at or below the last position applied changes nothing, so a
// resumed stream that overlaps is harmless.
type Fold struct {
	last  int
	order []*TurnView
	byID  map[string]*TurnView
}

// NewFold starts after position after (0: the beginning).
func NewFold(after int) *Fold { return &Fold{last: after, byID: map[string]*TurnView{}} }

// Position is the last position applied.
func (f *Fold) Position() int { return f.last }

// Turns are the turns, oldest first.
func (f *Fold) Turns() []*TurnView { return f.order }

// Turn is a turn's view, when the fold has seen its acceptance.
func (f *Fold) Turn(id string) *TurnView { return f.byID[id] }

func finished(s TurnState) bool {
	return s == TurnStateCompleted || s == TurnStateFailed || s == TurnStateCancelled
}

// Apply folds e in; it reports whether e was new.
func (f *Fold) Apply(e *EntryFields) bool {
	if e.Seq <= f.last {
		return false
	}
	f.last = e.Seq
	if e.TurnId == nil {
		return true
	}
	t := f.byID[*e.TurnId]
	if t == nil {
		if e.Kind != JournalKindTurnAccepted {
			return true // accepted before the fold's start
		}
		t = &TurnView{ID: *e.TurnId, Position: e.Seq, State: TurnStateQueued, QueuePosition: -1}
		if e.Accepted != nil {
			t.AuthorID, t.Author = e.Accepted.AuthorId, e.Accepted.AuthorName
		}
		if e.Text != nil {
			t.Input = *e.Text
		}
		f.byID[t.ID] = t
		f.order = append(f.order, t)
		f.requeue()
		return true
	}
	switch e.Kind {
	case JournalKindTurnStarted:
		attempt := e.Attempt
		if e.Started != nil {
			attempt = e.Started.Attempt
		}
		if attempt != t.Attempt {
			t.newAttempt(attempt)
		}
		if !finished(t.State) {
			t.State = TurnStateRunning
		}
		f.requeue()
	case JournalKindAnswerDelta:
		d := e.Delta
		if d == nil || t.Answered || d.Attempt < t.Attempt {
			break
		}
		if d.Attempt > t.Attempt {
			t.newAttempt(d.Attempt)
		}
		if t.restart {
			t.draftAt, t.restart = d.Offset, false
		}
		at := d.Offset - t.draftAt
		switch {
		case at < 0:
			// A discarded draft's text.
		case at <= len(t.Answer):
			// The offset places the text: a repeat overlaps, never doubles.
			t.Answer = t.Answer[:at] + d.Text
		default:
			t.Answer += d.Text
		}
	case JournalKindToolRequested:
		t.discardDraft()
		if e.Tool != nil {
			v := ToolView{CallID: e.Tool.CallId, Name: e.Tool.Name}
			if e.Tool.Arguments != nil {
				v.Arguments = *e.Tool.Arguments
			}
			t.Tools = append(t.Tools, v)
		}
	case JournalKindToolCompleted:
		if e.Tool == nil {
			break
		}
		status := ""
		if e.Tool.Status != nil {
			status = *e.Tool.Status
		}
		found := false
		for i := range t.Tools {
			if t.Tools[i].CallID == e.Tool.CallId {
				t.Tools[i].Status, found = status, true
			}
		}
		if !found {
			t.Tools = append(t.Tools, ToolView{CallID: e.Tool.CallId, Name: e.Tool.Name, Status: status})
		}
	case JournalKindApprovalRequested:
		if a := e.ApprovalRequest; a != nil {
			t.Approvals = append(t.Approvals, ApprovalView{ApprovalID: a.ApprovalId, Tool: a.Tool, Arguments: a.Arguments, State: ApprovalStatePending})
		}
	case JournalKindApprovalDecided:
		if d := e.ApprovalDecision; d != nil {
			for i := range t.Approvals {
				if t.Approvals[i].ApprovalID == d.ApprovalId {
					t.Approvals[i].State = d.State
				}
			}
		}
	case JournalKindSteerDelivered, JournalKindSteerRejected:
		// A delivered steer gets the run a new step, which writes the
		// answer again with it.
		if e.Kind == JournalKindSteerDelivered {
			t.discardDraft()
		}
		if st := e.Steer; st != nil {
			kept := t.Steers[:0]
			for _, x := range t.Steers {
				if x.CommandID != st.CommandId {
					kept = append(kept, x)
				}
			}
			t.Steers = append(kept, SteerView{CommandID: st.CommandId, Text: st.Text, State: st.State})
		}
	case JournalKindTurnAnswer:
		if a := e.Answer; a != nil {
			t.Answer, t.Answered, t.Citations, t.Artifacts = a.Text, true, a.Citations, a.Artifacts
		}
	case JournalKindTurnTerminal:
		if e.Terminal != nil {
			t.Terminal, t.State = e.Terminal, e.Terminal.Outcome
			if e.Terminal.Reason == TerminalReasonAudienceWithheld {
				// The published answer is the notice; text streamed before
				// the turn was withheld from this viewer is not kept.
				t.Withheld, t.Interrupted = true, nil
				if !t.Answered {
					t.Answer = ""
				}
			}
			f.requeue()
		}
	}
	return true
}

// requeue recomputes the queue positions of waiting turns.
func (f *Fold) requeue() {
	ahead := 0
	for _, t := range f.order {
		t.QueuePosition = -1
		if t.State == TurnStateQueued {
			t.QueuePosition = ahead
		}
		if !finished(t.State) {
			ahead++
		}
	}
}
