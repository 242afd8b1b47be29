// Builds the chat web app into ./dist (committed; embedded by ../app.go).
//
//   npm ci && npm run build      (or, from the top: make web)
//
// esbuild, as for the GraphiQL bundle: one tool, byte-identical output for
// the same sources (CI rebuilds and diffs it), no dev server needed (the
// binary serves the page, same origin as the API). The client comes from
// ../../clients/ts/src by alias, and React from this folder only, so the
// page has one React.
import * as esbuild from 'esbuild';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.join(here, 'dist');
rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });

const client = path.resolve(here, '../../clients/ts/src');
await esbuild.build({
  entryPoints: { app: path.join(here, 'src/main.tsx') },
  outdir,
  bundle: true,
  minify: true,
  format: 'esm',
  jsx: 'automatic',
  legalComments: 'none',
  target: ['es2022', 'chrome111', 'firefox113', 'safari16.4'],
  define: { 'process.env.NODE_ENV': '"production"' },
  alias: {
    '@turngate/client/react': path.join(client, 'react.ts'),
    '@turngate/client': path.join(client, 'index.ts'),
    react: path.join(here, 'node_modules/react'),
    'react-dom': path.join(here, 'node_modules/react-dom'),
  },
  nodePaths: [path.join(here, 'node_modules'), path.resolve(here, '../../clients/ts/node_modules')],
  logLevel: 'warning',
});

for (const f of readdirSync(outdir).sort()) {
  const data = readFileSync(path.join(outdir, f));
  console.log(`${f.padEnd(12)} ${(data.length / 1024).toFixed(1).padStart(7)} KiB  gzip ${(gzipSync(data, { level: 9 }).length / 1024).toFixed(1).padStart(6)} KiB`);
}
