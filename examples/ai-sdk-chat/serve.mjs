// Serves the built example (dist/) and passes /graphql, and turngate's own
// chat page at /turngate/ (where a dev-mode server gives a visitor on this
// machine the demo members' envelopes), through to turngate: one origin,
// as the identity header and the server's content policy want.
//
//   TURNGATE_URL=http://127.0.0.1:8080 PORT=5173 npm start
//
// PORT=0 picks a free port. The first line printed is the address.
import { createReadStream, existsSync, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'dist');
const upstream = new URL(process.env.TURNGATE_URL ?? 'http://127.0.0.1:8080');
const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

const server = http.createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (url.pathname === '/graphql') return pass(req, res, req.url);
  if (url.pathname.startsWith('/turngate/')) return pass(req, res, url.pathname.slice('/turngate'.length) + url.search);
  const file = path.join(dist, url.pathname === '/' ? 'index.html' : path.normalize(url.pathname));
  if (!file.startsWith(dist + path.sep) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404).end('not found');
    return;
  }
  res.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-cache' });
  createReadStream(file).pipe(res);
});

/**
 * Passes the request to turngate as it came (the Host header too: a
 * dev-mode server gives envelopes only to a loopback visitor by a loopback
 * name) and streams the answer back as it arrives (SSE). When either side
 * goes away the other is closed, so a client sees a replica's death as a
 * dropped stream and resumes.
 */
function pass(req, res, target) {
  const up = http.request(
    { host: upstream.hostname, port: upstream.port, method: req.method, path: target, headers: req.headers, agent: false },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      res.flushHeaders();
      answer.pipe(res);
      answer.on('error', () => res.destroy());
      answer.on('aborted', () => res.destroy());
    },
  );
  up.on('error', (err) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end(String(err));
    else res.destroy();
  });
  res.on('close', () => up.destroy());
  req.pipe(up);
}

server.listen(Number(process.env.PORT ?? 5173), '127.0.0.1', () => {
  const { port } = server.address();
  console.log(`http://127.0.0.1:${port}`);
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
