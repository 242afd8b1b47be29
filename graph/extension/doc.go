// Package extension holds turngate's gqlgen handler extensions, apart from
// the resolvers as gqlgen keeps its own (graphql/handler/extension): the
// bounds on a query document before it is parsed and validated
// (QueryLimit, ComplexityLimit, QueryShape, the byte-weighed QueryCache,
// the replica-wide ParseBudget), the check of every string a request
// carries (InputCheck, CheckRawJSON), each member's command budget
// (CommandLimit), the one error presenter and recover function that map
// every error to a code, and the delivery of a subscription's failure
// (StreamErrors).
//
// # What it must not import
//
// graph (the resolvers use it, not the other way round) and any domain
// service: it knows requests, errors and identities (authority), nothing
// of rooms or turns.
package extension
