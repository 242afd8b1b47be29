// Package generated is gqlgen's executable schema for schema.graphql:
// written by `make generate`, never edited by hand. Resolver logic lives in
// package graph; nothing here decides anything.
//
// # What it must not import
//
// Only graph/model and gqlgen's runtime; never a domain package.
package generated
