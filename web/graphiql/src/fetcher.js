// The GraphiQL fetcher used by main.jsx: queries and mutations go through the
// stock @graphiql/toolkit HTTP fetcher, subscriptions through gqlgen's SSE
// transport. Both send the headers from GraphiQL's Headers editor.
import { createGraphiQLFetcher } from '@graphiql/toolkit';
import { Kind, parse } from 'graphql';

// operationType reports the type ("query", "mutation", "subscription") of the
// operation GraphiQL is about to run, honouring operationName when the document
// holds several operations. It returns undefined when the document cannot be
// parsed; the server then reports the syntax error through the HTTP path.
function operationType(params, documentAST) {
  let doc;
  try {
    doc = parse(params.query);
  } catch {
    doc = documentAST;
  }
  if (!doc) return undefined;
  const ops = doc.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
  const op = params.operationName
    ? ops.find((o) => o.name?.value === params.operationName)
    : ops.length === 1
      ? ops[0]
      : undefined;
  return op?.operation;
}

// splitLines yields complete lines of a text stream, accepting the CRLF, LF and
// CR line endings allowed by the event-stream format.
async function* splitLines(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        finished = true;
        break;
      }
      buf += value;
      let m;
      // A trailing '\r' may be the first half of a CRLF split across chunks,
      // so it is only treated as a line end once more input has arrived.
      while ((m = /\r\n|\n|\r(?!$)/.exec(buf))) {
        yield buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
      }
    }
    if (buf.endsWith('\r')) buf = buf.slice(0, -1);
    if (buf) yield buf;
  } finally {
    // The consumer stopped early (e.g. after `event: complete`): release the
    // connection instead of leaving it to the server to close.
    if (!finished) reader.cancel().catch(() => {});
  }
}

// readEvents parses a text/event-stream body into {event, data} records
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
async function* readEvents(body) {
  let event = '';
  let data = [];
  for await (const line of splitLines(body)) {
    if (line === '') {
      if (event || data.length) yield { event: event || 'message', data: data.join('\n') };
      event = '';
      data = [];
      continue;
    }
    if (line.startsWith(':')) continue; // comment / keep-alive ping
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (event || data.length) yield { event: event || 'message', data: data.join('\n') };
}

// streamSubscription runs one subscription over gqlgen's SSE transport:
// POST with Accept: text/event-stream, then one `event: next` per result until
// `event: complete`.
async function* streamSubscription(endpoint, params, headers, signal) {
  const h = new Headers(headers);
  h.set('Content-Type', 'application/json');
  h.set('Accept', 'text/event-stream');
  try {
    const res = await fetch(endpoint, {
      method: 'POST',
      headers: h,
      body: JSON.stringify(params),
      signal,
    });
    const type = res.headers.get('Content-Type') || '';
    if (!type.includes('text/event-stream')) {
      // Rejected before streaming started (bad request, auth failure, …):
      // show the server's answer as the result.
      const text = await res.text();
      let payload;
      try {
        payload = JSON.parse(text);
      } catch {
        throw new Error(`${res.status} ${res.statusText}: ${text}`.trim());
      }
      yield payload;
      return;
    }
    for await (const ev of readEvents(res.body)) {
      if (ev.event === 'complete') return;
      if ((ev.event === 'next' || ev.event === 'message') && ev.data) yield JSON.parse(ev.data);
    }
  } catch (err) {
    if (signal.aborted) return; // stopped by the user: end quietly
    throw err;
  }
}

// sseSubscription wraps streamSubscription in a hand-written AsyncIterator.
// GraphiQL stops a subscription by calling return() while a next() is still
// pending; an async generator would queue that return() until the next event
// arrives, so here return() aborts the fetch immediately, which ends the
// pending read and closes the HTTP connection (the server sees the request
// context cancelled).
function sseSubscription(endpoint, params, headers) {
  const controller = new AbortController();
  let gen;
  const iterator = {
    [Symbol.asyncIterator]() {
      return iterator;
    },
    next() {
      gen ??= streamSubscription(endpoint, params, headers, controller.signal);
      return gen.next();
    },
    return(value) {
      controller.abort();
      return Promise.resolve({ done: true, value });
    },
  };
  return iterator;
}

// createFetcher routes subscriptions to SSE and everything else to the stock
// HTTP fetcher. Browsers cannot put custom headers (such as the identity
// header) on a WebSocket upgrade, but they can on a streaming POST, so SSE
// lets subscriptions carry exactly the headers from GraphiQL's Headers editor,
// like queries and mutations do.
export function createFetcher(endpoint) {
  const http = createGraphiQLFetcher({ url: endpoint });
  return (params, opts = {}) => {
    if (operationType(params, opts.documentAST) === 'subscription') {
      return sseSubscription(endpoint, params, opts.headers || {});
    }
    return http(params, opts);
  };
}
