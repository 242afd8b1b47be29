// Package web serves the chat web app (App, at /) and an offline GraphiQL
// explorer (Handler, mounted at /graphiql/) for the turngate GraphQL
// endpoint.
//
// The chat app is built from web/app (React on @turngate/client, bundled
// by esbuild) into app/dist, committed and embedded like GraphiQL's bundle;
// `make web` rebuilds it and `make test` fails when it is stale.
//
// The page and all of its JavaScript, CSS, fonts and Monaco web workers are
// embedded in the binary from dist/, so the explorer works on machines with no
// internet access and nothing is ever loaded from a CDN. dist/ is a build
// product that is committed, so `go build` needs no Node toolchain. To rebuild
// it after changing web/graphiql (sources, or the pinned npm versions):
//
//	cd web/graphiql && npm ci && npm run build
//
// Subscriptions are sent from the browser over gqlgen's SSE transport (a POST
// with Accept: text/event-stream) rather than a WebSocket, because browsers
// cannot set custom headers such as the identity header on a WebSocket
// upgrade, whereas a streaming POST carries the same headers as any query.
//
// # What it must not import
//
// web serves embedded files only; it imports no package of this module.
package web
