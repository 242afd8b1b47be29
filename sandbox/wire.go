package sandbox

import (
	"context"
	"errors"
	"strings"
)

// The frames of the pipes between the pool and a worker, gob-encoded (one
// gob stream per direction for the worker's life, so each type is
// described once and a frame costs little more than its data).
//
// The pool writes a run, then at most one cancel for it, then waits for the
// run's reply before it writes the next run. The worker answers every run
// with exactly one reply, in order; its first frame is a hello (Seq 0).

// call is a frame from the pool to a worker.
type call struct {
	// Seq numbers the runs of one worker from 1.
	Seq uint64
	// Cancel asks the worker to stop run Seq, whose caller's context
	// ended; a cancel for a run that is over is ignored.
	Cancel bool
	// Req is the run, its Limits already defaulted and capped by the
	// pool.
	Req Request
}

// reply is a frame from a worker to the pool.
type reply struct {
	Seq    uint64
	Result Result
	Err    *wireError
	// Limit is the hello's: the worker's RLIMIT_AS in bytes.
	Limit int64
	// Ack says the worker took run Seq and is about to run it: a worker
	// that dies before it acknowledged never started the script, so the
	// run may go to another worker; one that dies after it is the run's.
	Ack bool
}

// wireError is an error of execute, carried to the pool with its sentinel.
type wireError struct {
	// Kind is 1 + the sentinel's index in wireKinds; 0 for a plain error.
	Kind int
	Msg  string
	// Ctx: the run stopped because the pool cancelled it; the pool adds
	// its caller's ctx.Err() (the worker only knows "cancelled").
	Ctx bool
}

// wireKinds are the sentinels a worker's error may wrap. Append only: the
// index is the wire format between a server and the workers it started
// from the same binary, so in practice it may change freely, but there is
// no reason to.
var wireKinds = []error{ErrSteps, ErrOutput, ErrWallTime, ErrScript, ErrRefused, ErrInputDigest}

// toWire encodes an error of execute.
func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Msg: err.Error()}
	for i, k := range wireKinds {
		if errors.Is(err, k) {
			w.Kind = i + 1
			break
		}
	}
	if errors.Is(err, context.Canceled) {
		w.Ctx = true
		w.Msg = strings.TrimSuffix(w.Msg, ": "+context.Canceled.Error())
	}
	return w
}

// err decodes the error for the pool's caller, whose context is ctx.
func (w *wireError) err(ctx context.Context) error {
	if w == nil {
		return nil
	}
	e := &remoteError{msg: w.Msg}
	if w.Kind > 0 && w.Kind <= len(wireKinds) {
		e.kind = wireKinds[w.Kind-1]
	}
	if w.Ctx {
		if e.cause = ctx.Err(); e.cause == nil {
			e.cause = context.Canceled
		}
	}
	return e
}

// remoteError is an error that crossed the pipe: the worker's message,
// wrapping the same sentinel and, when the caller's context stopped the
// run, the context's error.
type remoteError struct {
	kind  error // nil for a plain error
	msg   string
	cause error
}

func (e *remoteError) Error() string {
	if e.cause != nil {
		return e.msg + ": " + e.cause.Error()
	}
	return e.msg
}

func (e *remoteError) Unwrap() []error {
	var errs []error
	if e.kind != nil {
		errs = append(errs, e.kind)
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}
