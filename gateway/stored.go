package gateway

// The stored form of one model call, for turn replay: the backend writes
// it (callback) and the API reads it (turn), redacted and bounded.

// StoredRequest is what a stored model call keeps of its request: the
// messages after redaction (without the turn's runtime context, which is
// never stored) and the names of the tools offered.
type StoredRequest struct {
	Messages []Message `json:"messages"`
	Tools    []string  `json:"tools,omitempty"`
	// Omitted is how many messages from the middle were not kept.
	Omitted   int  `json:"omitted,omitempty"`
	Truncated bool `json:"truncated,omitempty"`
}

// StoredResponse is what a stored model call keeps of its response.
type StoredResponse struct {
	Text         string     `json:"text"`
	ToolCalls    []ToolCall `json:"toolCalls,omitempty"`
	FinishReason string     `json:"finishReason,omitempty"`
	Truncated    bool       `json:"truncated,omitempty"`
}
