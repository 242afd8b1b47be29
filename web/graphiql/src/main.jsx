// Entry point of the offline GraphiQL explorer served by package web (../../web.go).
//
// Everything the page needs is bundled by build.mjs into ../dist: no CDN, no
// network access other than the GraphQL endpoint itself.
import { createRoot } from 'react-dom/client';
import { GraphiQL } from 'graphiql';
import { createFetcher } from './fetcher.js';
import 'graphiql/style.css';

// Monaco runs its language services in web workers. They are built as separate
// classic scripts next to this module (see build.mjs), so they are resolved
// relative to import.meta.url rather than to a fixed path or a CDN. The
// module's ?v= cache-busting query is carried over so the workers are cached
// (and invalidated) together with it.
globalThis.MonacoEnvironment = {
  getWorker(_workerId, label) {
    const file =
      label === 'json' ? 'json.worker.js' : label === 'graphql' ? 'graphql.worker.js' : 'editor.worker.js';
    const url = new URL(file, import.meta.url);
    url.search = new URL(import.meta.url).search;
    return new Worker(url, { name: label });
  },
};

// The server renders the config as a JSON data block (never as executable
// script), so it is parsed rather than evaluated.
function readConfig() {
  const el = document.getElementById('config');
  let cfg = {};
  try {
    cfg = JSON.parse(el?.textContent || '{}') || {};
  } catch (err) {
    console.error('turngate: invalid page config', err);
  }
  return {
    endpoint: typeof cfg.endpoint === 'string' && cfg.endpoint ? cfg.endpoint : '/graphql',
    headers: cfg.headers && typeof cfg.headers === 'object' ? cfg.headers : {},
    title: typeof cfg.title === 'string' ? cfg.title : '',
    defaultQuery: typeof cfg.defaultQuery === 'string' ? cfg.defaultQuery : undefined,
  };
}

const cfg = readConfig();
if (cfg.title) document.title = cfg.title;
const headersJSON = Object.keys(cfg.headers).length ? JSON.stringify(cfg.headers, null, 2) : undefined;

createRoot(document.getElementById('graphiql')).render(
  <GraphiQL
    fetcher={createFetcher(cfg.endpoint)}
    initialHeaders={headersJSON}
    defaultHeaders={headersJSON}
    shouldPersistHeaders={false}
    isHeadersEditorEnabled
    defaultEditorToolsVisibility={headersJSON ? 'headers' : undefined}
    defaultQuery={cfg.defaultQuery}
  />,
);
