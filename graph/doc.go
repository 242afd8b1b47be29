// Package graph holds the GraphQL resolvers. They are thin: read the
// identity from the context, make one domain call, map the result. The
// generated executor lives in graph/generated, the types in graph/model,
// and gqlgen's handler extensions (limits, input checks, the command rate
// limit, the error presenter, the parse budget, stream errors) in
// graph/extension, as gqlgen keeps its own.
//
// What the resolvers hold are services — authority.Members, room.Service,
// turn.Service, resource.Store, feed.Feed — never a database handle: no
// SQL is written here, and every authorization rule they apply is
// authority's, reached through those services; what a viewer may read of
// a room is feed's. Stream and Streams own the subscriptions' goroutines.
//
// # What it must not import
//
// graph is the API's edge: it imports the services and graph/generated,
// graph/model and graph/extension, never pg, database/sql, lib/pq,
// lease (it reads terminal reasons and usage from outcome), runner,
// callback or server. Nothing but server imports graph.
package graph
