// Package tools holds the tools a run may ask the backend to execute. The
// backend runs every tool as the member who started the turn: a tool sees
// who the member is and what they may do now, never more, and returns a
// bounded projection the model may read.
//
// It owns the tool executors and the registry a turn's tool list is drawn
// from: retrieval and read_document, history_search, create_artifact,
// run_code, the task tools, send_webhook and delegate's spec. It adapts
// the stores it acts on to the tool interface — artifacts and documents
// belong to package resource, which tools calls — and answers in the
// tool's vocabulary (ErrBadArguments, a Refusal's status). Every
// visibility rule a tool's query applies is authority's SQL fragment.
//
// A result says what it derives from (Result.Documents): the documents
// retrieval and read_document return, the evidence of the turns a
// history search finds, the evidence of the turns that made the files
// run_code reads. The backend records them as the turn's evidence before
// the model reads the result, so a tool that returns document content
// must name them.
//
// # What it must not import
//
// tools imports authority, pg, resource and sandbox; never turn, lease,
// runner, callback, journal, room, graph or server. The backend side of
// the contract (callback) calls tools, not the other way round.
package tools
