// Package graph holds the GraphQL resolvers. They are thin: read the
// identity from the context, make one domain call, map the result. The
// generated executor lives in graph/generated and the types in graph/model.
//
// What the resolvers hold are services — authority.Members, room.Service,
// turn.Service, resource.Store, journal.Log — never a database handle:
// no SQL is written here, and every authorization rule they apply is
// authority's, reached through those services. Stream and Streams own the
// subscriptions' goroutines; the rate limiter, input validation, limits on
// a query's shape and the query cache's weighing live beside them.
//
// # What it must not import
//
// graph is the API's edge: it imports the services and graph/generated
// and graph/model, never pg, database/sql, lib/pq, runner, callback or
// server. Nothing but server imports graph.
package graph
