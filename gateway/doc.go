// Package gateway is the model gateway: every model call of every run goes
// through it. It routes a request to a provider by the agent version's model
// route, applies policy (allowed models, tool filtering) and the turn's
// token budget, passes effort to providers that support it, and normalises
// what comes back into one stream of deltas: text, tool calls, usage,
// finish. The runtime never holds a model credential; providers live here,
// in the trusted backend.
//
// # What it must not import
//
// gateway imports no package of this module: it knows requests, routes and
// providers, never turns, rooms or the database.
package gateway
