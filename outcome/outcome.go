package outcome

// Terminal reasons.
const (
	ReasonCompleted      = "completed"
	ReasonInputLeaseLost = "input_lease_lost"
	ReasonRuntimeFailed  = "runtime_failed"
	// ReasonBudgetExhausted ends a run whose token or wall-time budget ran
	// out beyond what forced synthesis could answer.
	ReasonBudgetExhausted = "budget_exhausted"
	// ReasonRecoveryExhausted ends a turn whose runs kept dying: after the
	// runner's maximum attempts, recovery writes this safe terminal
	// instead of starting another.
	ReasonRecoveryExhausted = "recovery_exhausted"
	// ReasonMembershipRevoked ends a turn whose author left the room
	// before its answer was published.
	ReasonMembershipRevoked = "membership_revoked"
	// ReasonAudienceWithheld completes a turn in a shared room whose
	// answer drew on a document a member who joined before publication
	// may not read: the answer is withheld (WithheldAnswer).
	ReasonAudienceWithheld = "audience_withheld"
	// ReasonCancelled ends a turn a member cancelled.
	ReasonCancelled = "cancelled_by_member"

	// The model failures a member or an operator acts on differently
	// (wait, page the provider, fix the credentials, fix the route): the
	// runner names the gateway's error instead of ReasonRuntimeFailed.
	ReasonModelRateLimited  = "model_rate_limited"
	ReasonModelUnavailable  = "model_unavailable"
	ReasonModelAuthFailed   = "model_auth_failed"
	ReasonModelStreamCut    = "model_stream_cut"
	ReasonModelStreamIdle   = "model_stream_idle"
	ReasonModelRouteInvalid = "model_route_invalid"
)

// Usage is what a turn spent over all its attempts' recorded work.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
	ModelCalls   int `json:"modelCalls"`
	ToolCalls    int `json:"toolCalls"`
}

// WithheldAnswer replaces an answer in a shared room that drew on a
// document not every current member may read (ReasonAudienceWithheld).
const WithheldAnswer = "Part of this answer drew on documents that not every member of this room may read, " +
	"so it is withheld here. Ask in a private conversation for it."
