// Builds the example into ./dist with esbuild, as web/app/build.mjs builds
// turngate's own chat: one bundle, no dev server. `npm start` serves it.
//
//   npm ci && npm run build
//
// @turngate/client is the repository's clients/ts (a file: dependency),
// used through its package exports, so it must be built first:
// (cd ../../clients/ts && npm ci && npm run build).
import * as esbuild from 'esbuild';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.join(here, 'dist');
const client = path.join(here, 'node_modules/@turngate/client');
if (!existsSync(path.join(client, 'dist/ai-sdk.js'))) {
  console.error('@turngate/client is not built: run (cd ../../clients/ts && npm ci && npm run build), then build again');
  process.exit(1);
}
rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });

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
  // One React and one `ai` for the page: the client's folder (linked, with
  // node_modules of its own) resolves them from here.
  alias: {
    react: path.join(here, 'node_modules/react'),
    'react-dom': path.join(here, 'node_modules/react-dom'),
    ai: path.join(here, 'node_modules/ai'),
  },
  logLevel: 'warning',
});
copyFileSync(path.join(here, 'src/index.html'), path.join(outdir, 'index.html'));
copyFileSync(path.join(here, 'src/app.css'), path.join(outdir, 'app.css'));

for (const f of readdirSync(outdir).sort()) {
  const data = readFileSync(path.join(outdir, f));
  console.log(`${f.padEnd(12)} ${(data.length / 1024).toFixed(1).padStart(7)} KiB  gzip ${(gzipSync(data, { level: 9 }).length / 1024).toFixed(1).padStart(6)} KiB`);
}
