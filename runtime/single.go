package runtime

import "context"

// single answers with one model step.
type single struct{}

func (single) Run(ctx context.Context, c Contract, cb Callbacks) error {
	msgs := make([]Message, 0, len(c.History)+2)
	if c.System != "" {
		msgs = append(msgs, Message{Role: "system", Content: c.System})
	}
	msgs = append(msgs, c.History...)
	msgs = append(msgs, c.Message)
	res, err := cb.Model(ctx, ModelRequest{Run: c.Run, Messages: msgs}, nil)
	if err != nil {
		return err
	}
	return cb.Complete(ctx, Completion{Run: c.Run, Answer: res.Text})
}
