package runtime

import "context"

// single answers with one model step, without tools — and one more for
// steering that arrives while that step streams.
type single struct{}

func (single) Run(ctx context.Context, c Contract, cb Callbacks) error {
	msgs := make([]Message, 0, len(c.History)+2)
	if c.System != "" {
		msgs = append(msgs, Message{Role: RoleSystem, Content: c.System})
	}
	msgs = append(msgs, c.History...)
	msgs = append(msgs, c.Message)
	// Its one step boundary is before its one step.
	steers, err := cb.Steering(ctx, c.Run)
	if err != nil {
		return err
	}
	for _, st := range append(c.Steering, steers...) {
		msgs = append(msgs, Message{Role: RoleUser, Content: "Steering from the member for this answer: " + st.Text})
	}
	for {
		res, err := cb.Model(ctx, ModelRequest{Run: c.Run, Purpose: PurposeStep, Messages: msgs}, nil)
		if err != nil {
			return err
		}
		// Steering that came while the answer streamed gets one more
		// step, which answers with it.
		steers, err := cb.Steering(ctx, c.Run)
		if err != nil {
			return err
		}
		if len(steers) == 0 {
			return complete(ctx, cb, c.Run, msgs, res.Text)
		}
		msgs = append(msgs, Message{Role: RoleAssistant, Content: res.Text})
		for _, st := range steers {
			msgs = append(msgs, Message{Role: RoleUser, Content: "Steering from the member for this answer: " + st.Text})
		}
	}
}
