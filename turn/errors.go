package turn

import (
	"errors"

	"github.com/turngate/turngate/journal"
)

// ErrFenced reports a run write refused because the run's lease token is not
// the turn's current one, or the turn is no longer running. Nothing was
// written.
var ErrFenced = journal.ErrFenced

// ErrLeaseLost reports a heartbeat that found its claim gone or expired.
var ErrLeaseLost = errors.New("input lease lost")

// Terminal reasons recorded on failed turns.
const (
	ReasonInputLeaseLost = "input_lease_lost"
	ReasonRuntimeFailed  = "runtime_failed"
	ReasonCompleted      = "completed"
	// ReasonBudgetExhausted ends a run whose token or wall-time budget ran
	// out beyond what forced synthesis could answer.
	ReasonBudgetExhausted = "budget_exhausted"
)
