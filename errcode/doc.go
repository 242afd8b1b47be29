// Package errcode is the one vocabulary of failures a client may see. Domain
// packages return *Error values for every failure that is the caller's to
// fix; the GraphQL error presenter turns them into extensions.code and
// treats anything else as an internal error that is logged, not shown.
//
// The set of codes is closed: Codes lists every code the server sends, and
// the README's "Limits and errors" documents each with what a client should
// do. Only UNAVAILABLE and RATE_LIMITED are retryable.
//
// # What it must not import
//
// errcode is a leaf: the standard library and lib/pq (to classify storage
// failures as UNAVAILABLE) only, no package of this module.
package errcode
