// Package runtime is the untrusted agent runtime.
//
// A controller orders the work of one run — model steps and, as the runtime
// grows, tool requests, checkpoints, steering and completion — but executes
// none of it. Its only door to the world is Callbacks, implemented by the
// trusted backend, which checks every call against the run's fence and
// authority before acting. The runtime holds no credentials, no database
// handle and no member data beyond what a callback returned; every type
// that crosses Callbacks is plain JSON-serialisable data, so the runtime can
// later run as a process of its own behind the same contract.
// imports_test.go enforces that nothing under runtime/ reaches the backend,
// a database or a network client.
//
// # Lifecycle
//
// The backend admits one immutable Contract per run. Host.Run creates one
// controller for it from the static registry (an unknown name is refused),
// runs it, and enforces the lifecycle rules: exactly one completion per run,
// and none after the run's context has ended.
package runtime
