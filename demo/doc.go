// Package demo seeds the demo data set that `make run` serves: two members,
// the default agent, a shared room and a private room each. Tests build on
// the same data.
//
// Only a server in demo mode seeds it (TURNGATE_DEMO, on in dev mode);
// a production server seeds nothing, not even the default agent.
//
// # What it must not import
//
// demo imports the stores it writes through (authority, room, resource,
// ent) and tools for tool names; never turn, runner, callback, graph or
// server, and lease only as room uses it.
package demo
