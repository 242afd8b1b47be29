// The world the tests run in: a real turngate behind one front door
// (TURNGATE_URL) and the Go test's control endpoint (TURNGATE_CONTROL),
// which kills, restarts and adds replicas and drops connections.
import WebSocket from 'ws';

import { createClient, type ClientOptions, type Entry, type TurngateClient } from '../src/index.js';
import { JournalDocument } from '../src/generated/graphql.js';

export const url = need('TURNGATE_URL');
const control = need('TURNGATE_CONTROL');

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through the Go test TestTypeScriptClient (make test)`);
  return v;
}

/** Asks the front door to do something to the replicas or the network. */
export async function ctl(action: 'drop' | 'failover' | 'restart' | 'restart?signal=term' | 'down' | 'up'): Promise<void> {
  const res = await fetch(`${control}/${action}`, { method: 'POST' });
  if (!res.ok) throw new Error(`control ${action}: ${res.status} ${await res.text()}`);
}

const tokens = new Map<string, string>();

/** A dev identity envelope for email, minted by the server's own key. */
export async function token(email: string): Promise<string> {
  let t = tokens.get(email);
  if (!t) {
    const res = await fetch(`${control}/token?email=${encodeURIComponent(email)}`);
    if (!res.ok) throw new Error(`token ${email}: ${res.status}`);
    t = (await res.json()) as string;
    tokens.set(email, t);
  }
  return t;
}

/** A client for email; opts override the defaults. */
export async function clientFor(email: string, opts: Partial<ClientOptions> = {}): Promise<TurngateClient> {
  const t = await token(email);
  const ws = opts.transport === 'ws' ? { webSocketImpl: WebSocket } : {};
  return createClient({ url, identity: () => t, retry: { windowMs: 60_000, baseDelayMs: 100, maxDelayMs: 1_000 }, ...ws, ...opts });
}

/** Every journal entry of a room as the server has it, by pages. */
export async function journalOf(c: TurngateClient, roomId: string): Promise<Entry[]> {
  const out: Entry[] = [];
  for (;;) {
    const page = await c.query(JournalDocument, { conversationId: roomId, after: out.at(-1)?.seq ?? 0, first: 500 });
    out.push(...page.journal.entries);
    if (!page.journal.hasMore) return out;
  }
}

/** The id of the room titled title that c is a member of. */
export async function roomId(c: TurngateClient, title: string): Promise<string> {
  const rooms = await c.conversations(100);
  const r = rooms.find((x) => x.title === title);
  if (!r) throw new Error(`no room ${title} among ${rooms.map((x) => x.title).join(', ')}`);
  return r.id;
}

/** A fetch that counts requests and the error codes of their answers. */
export function countingFetch(): { fetch: typeof fetch; requests: () => number; codes: string[] } {
  let n = 0;
  const codes: string[] = [];
  const f: typeof fetch = async (input, init) => {
    n++;
    const res = await fetch(input, init);
    if ((res.headers.get('content-type') ?? '').includes('json')) {
      const body = await res.clone().json().catch(() => null);
      for (const e of body?.errors ?? []) codes.push(e.extensions?.code);
    }
    return res;
  };
  return { fetch: f, requests: () => n, codes };
}
