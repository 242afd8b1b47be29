// Builds the offline GraphiQL bundle into ../dist (committed; embedded by ../web.go).
//
//   npm ci && npm run build
//
// Outputs:
//   graphiql.js, graphiql.css           the page (ESM module + self-contained CSS with inline fonts)
//   editor.worker.js, json.worker.js,
//   graphql.worker.js                   Monaco web workers (classic scripts), loaded by
//                                       MonacoEnvironment.getWorker in src/main.jsx
import * as esbuild from 'esbuild';
import { rmSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.resolve(here, '../dist');

rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });

// graphiql/style.css already contains Monaco's complete CSS (with the codicon
// font inlined), so the per-widget CSS files Monaco's ESM sources import are
// dropped instead of being bundled a second time.
const dropMonacoCss = {
  name: 'drop-monaco-css',
  setup(build) {
    build.onResolve({ filter: /\.css$/ }, (args) =>
      args.importer.includes(`${path.sep}monaco-editor${path.sep}`)
        ? { path: args.path, namespace: 'empty-css' }
        : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'empty-css' }, () => ({ contents: '', loader: 'css' }));
  },
};

const common = {
  bundle: true,
  minify: true,
  legalComments: 'none',
  target: ['es2022', 'chrome111', 'firefox113', 'safari16.4'],
  define: { 'process.env.NODE_ENV': '"production"' },
  logLevel: 'info',
  plugins: [dropMonacoCss],
};

// The page. ESM so src/main.jsx can locate the workers via import.meta.url.
// No code splitting: the lazily imported Monaco/prettier modules are inlined,
// keeping the asset list fixed (graphiql.js + graphiql.css).
await esbuild.build({
  ...common,
  entryPoints: { graphiql: 'src/main.jsx' },
  outdir,
  format: 'esm',
  jsx: 'automatic',
  loader: { '.ttf': 'dataurl', '.woff': 'dataurl', '.woff2': 'dataurl' },
});

// Monaco workers, one classic-script bundle each.
await esbuild.build({
  ...common,
  entryPoints: {
    'editor.worker': 'monaco-editor/esm/vs/editor/editor.worker.js',
    'json.worker': 'monaco-editor/esm/vs/language/json/json.worker.js',
    'graphql.worker': 'monaco-graphql/esm/graphql.worker.js',
  },
  outdir,
  format: 'iife',
});

let total = 0;
for (const f of readdirSync(outdir).sort()) {
  const n = statSync(path.join(outdir, f)).size;
  total += n;
  console.log(`${f.padEnd(22)} ${(n / 1024).toFixed(0).padStart(6)} KiB`);
}
console.log(`${'total'.padEnd(22)} ${(total / 1024).toFixed(0).padStart(6)} KiB`);
