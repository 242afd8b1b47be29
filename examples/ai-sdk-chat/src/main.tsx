import { createRoot } from 'react-dom/client';

import { App } from './App';
import { devMembers } from './identity';

const root = createRoot(document.getElementById('root')!);
// The host page's sign-in wins; otherwise the dev server's demo members.
const members = typeof window.turngateIdentity === 'function' ? Promise.resolve([]) : devMembers();
members.then(
  (ms) => root.render(<App members={ms} />),
  (err) => root.render(<p role="alert">No identity: {String(err)}</p>),
);
