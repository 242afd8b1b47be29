package chat

import (
	"context"
	"fmt"
	"io"
	"strings"

	client "github.com/turngate/turngate/clients/go"
)

// Exit codes of Once.
const (
	ExitCompleted = 0
	ExitFailed    = 1
	ExitCancelled = 2
	// ExitError: the turn could not be sent or followed.
	ExitError = 3
)

// Once submits text to room, prints the answer to out as it streams and
// its sources to errOut, and returns ExitCompleted, ExitFailed or
// ExitCancelled by the turn's outcome (ExitError, with the error, when it
// could not be sent or followed).
func Once(ctx context.Context, c *client.Client, room, text string, out, errOut io.Writer) (int, error) {
	turn, err := c.Submit(ctx, room, text, client.SubmitOptions{})
	if err != nil {
		return ExitError, err
	}
	// Follow from just before the turn's acceptance: everything of it.
	s := c.Follow(ctx, room, turn.Position-1)
	defer s.Close()
	fold := client.NewFold(turn.Position - 1)
	// printed is what out shows of the answer, written by attempt.
	printed, attempt := "", 0
	for u := range s.Updates() {
		if u.Entry == nil {
			if u.State == client.Closed {
				return ExitError, u.Err
			}
			if u.State == client.Offline {
				return ExitError, fmt.Errorf("offline: %w", u.Err)
			}
			continue
		}
		fold.Apply(u.Entry)
		v := fold.Turn(turn.Id)
		if v == nil {
			continue
		}
		switch {
		case strings.HasPrefix(v.Answer, printed):
			io.WriteString(out, v.Answer[len(printed):])
			printed, attempt = v.Answer, v.Attempt
		case v.Answered && !v.Ended():
			// A published answer that is not the streamed text: its
			// terminal, next, says why.
		case v.Withheld:
			// Someone joined who may not read what the answer drew on:
			// the room reads the notice in its place.
			fmt.Fprintln(errOut, "\n[the answer is withheld from the room]")
			io.WriteString(out, "\n"+v.Answer)
			printed = v.Answer
		case v.Attempt != attempt:
			// A crash cut the attempt off; the next one writes the
			// answer again from its start. What out shows cannot be
			// taken back: say where the new text begins.
			fmt.Fprintf(errOut, "\n[interrupted: attempt %d was cut off; attempt %d writes the answer again from the start]\n", attempt, v.Attempt)
			io.WriteString(out, "\n"+v.Answer)
			printed, attempt = v.Answer, v.Attempt
		default:
			// The run discarded the text above (a steer it took, a tool
			// it called after it), or published an answer other than it.
			fmt.Fprintln(errOut, "\n[replaced: the answer is written again]")
			io.WriteString(out, "\n"+v.Answer)
			printed = v.Answer
		}
		if !v.Ended() {
			continue
		}
		io.WriteString(out, "\n")
		for i, cite := range v.Citations {
			fmt.Fprintf(errOut, "[%d] %s: %s\n", i+1, cite.Source, cite.Passage)
		}
		switch v.State {
		case client.TurnStateCompleted:
			return ExitCompleted, nil
		case client.TurnStateCancelled:
			fmt.Fprintln(errOut, "cancelled")
			return ExitCancelled, nil
		default:
			fmt.Fprintf(errOut, "failed: %s\n", v.Terminal.Reason)
			return ExitFailed, nil
		}
	}
	return ExitError, ctx.Err()
}
