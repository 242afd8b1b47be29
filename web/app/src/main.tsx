import { createRoot } from 'react-dom/client';

import { App, type PageConfig } from './App';
import './app.css';

// The page's config travels in a JSON block the server renders (see
// ../app.go): the endpoint, the identity header and, in dev mode on a
// loopback address only, the demo members' envelopes.
const raw = document.getElementById('config')?.textContent ?? '{}';
const config = JSON.parse(raw) as PageConfig;
createRoot(document.getElementById('root')!).render(<App config={config} />);
