// Package e2e is the end-to-end tier: what only real processes, a real
// browser, npm and a pseudo-terminal can show — kill -9 and SIGTERM of
// replicas, recovery and chaos, the binary's commands, the container's
// parts, PgBouncer, memory under attack, the TypeScript and Go clients,
// the terminal chat, and the web app and GraphiQL in Chromium.
//
// make test runs it once, after the package tests, with one turngate
// binary built for the whole tier (race-built, as the tier runs under
// -race) and one Chromium for the package, each test in a fresh browser
// context. It holds tests only; its kit is internal/e2etest, and
// internal/servertest starts in-process servers for the tests that drive
// one from a browser.
//
// # What it must not import
//
// The tier is tests alone: nothing imports it, and its one non-test file
// (this one) imports nothing.
package e2e
