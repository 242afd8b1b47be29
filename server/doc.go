// Command turngate is the durable chat-turn server.
//
//	turngate [serve] [--addr HOST:PORT]   run the server (default)
//	turngate migrate                      apply database migrations and exit
//	turngate token --email E [--ttl D] [--data DIR]
//	                                      print a dev identity envelope, signed
//	                                      with the dev key of the server's folder
//
// With no DATABASE_URL it starts a private PostgreSQL in its data folder
// (TURNGATE_DATA, default .turngate). See config.go for the environment.
//
// The package wires the services into an App (app.go): the database, the
// journal hub, the runner, the resolvers and the HTTP routes (http.go:
// GraphQL over HTTP, WebSocket and SSE, GraphiQL, the web app, artifact
// downloads), and owns the process's lifecycle — start, orderly drain on
// SIGTERM, and the order things stop in.
//
// # What it must not import
//
// Nothing imports server. It may import every package; it writes no SQL
// on the domain's tables (creating the database it is pointed at, and the
// embedded Postgres in internal/pgembed, are its own).
package main
