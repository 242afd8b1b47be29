// Package runtime is the untrusted agent runtime.
//
// A controller orders the work of one run — model steps, tool requests,
// compaction, checkpoints, steering and completion — but executes none of
// it. Its only door to the world is Callbacks, implemented by the trusted
// backend, which checks every call against the run's fence and authority
// before acting. The runtime holds no credentials, no database handle and
// no member data beyond what a callback returned; every type that crosses
// Callbacks is plain JSON-serialisable data, so the runtime can later run
// as a process of its own behind the same contract.
//
// # Controllers
//
// The registry is static: "single" answers with one model step; "react"
// alternates model steps and tool requests until the model answers, takes
// member steering at each step boundary, compacts the conversation when it
// would exceed the contract's context budget, and checkpoints every tool
// round so a replacement attempt resumes from the last one.
//
// # Lifecycle and budgets
//
// The backend admits one immutable Contract per run. Run creates one
// controller for it from the registry (an unknown name is refused) and
// wraps the callbacks in a host that enforces the lifecycle rules (exactly
// one completion per run, nothing after it) and the fixed budgets: steps,
// tool calls, tokens and wall time. When the steps, tool calls, tokens or
// wall time run out, the host turns the next model step into forced
// synthesis — one last step, without tools, that answers from the evidence
// already gathered — instead of failing the turn. Twice past its wall time
// a run is stopped.
//
// # What it must not import
//
// Nothing of the trusted backend: no package of this module outside
// runtime/, no database driver (database/sql, lib/pq) and no network client
// (net, net/http, net/rpc, net/smtp, coder/websocket), not even through
// another package. internal/layering checks it on the real import graph.
package runtime
