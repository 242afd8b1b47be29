// Command turngate is the durable chat-turn server and its tools.
//
//	turngate [serve] [--addr HOST:PORT]   run the server (default)
//	turngate migrate                      apply database migrations and exit
//	turngate token --email E [--ttl D] [--data DIR]
//	                                      print a dev identity envelope, signed
//	                                      with the dev key of the server's folder
//	turngate chat [flags]                 chat in a terminal, against a server
//	turngate admin ...                    documents, members and agents
//	turngate version | help
//
// Settings come from the environment (package server's config.go; the
// README's Configuration table lists every one). main is small: it reads
// the command line and calls package server and the clients.
//
// # What it must not import
//
// The command is the production binary: it imports no test kit
// (internal/dbtest, internal/testkit, internal/servertest,
// internal/e2etest, internal/gqlclient) and nothing of the end-to-end
// tier, and nothing imports it.
package main
