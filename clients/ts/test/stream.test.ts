// The room stream against a real turngate: it resumes from the last
// position seen across a dropped socket, an orderly restart, a kill -9 of
// every replica and a failover to another replica, never repeating or
// skipping an entry, and its turn views match the journal.
import { afterEach, describe, expect, it } from 'vitest';

import type { ConnectionState, RoomStream, StreamTransport, TurngateClient } from '../src/index.js';
import { clientFor, ctl, journalOf, roomId } from './world.js';

const open: RoomStream[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.stop();
});

/** Follows room as c, recording every state the stream passes through. */
function follow(c: TurngateClient, room: string): { stream: RoomStream; states: ConnectionState[]; codes: string[] } {
  const stream = c.room(room);
  open.push(stream);
  const states: ConnectionState[] = [];
  const codes: string[] = [];
  stream.subscribe(() => {
    const s = stream.getSnapshot();
    if (states.at(-1) !== s.state) states.push(s.state);
    if (s.error && codes.at(-1) !== s.error.code) codes.push(s.error.code);
  });
  return { stream, states, codes };
}

/** The stream's entries are exactly the journal's: same positions, in order, none twice. */
async function sameAsJournal(c: TurngateClient, room: string, stream: RoomStream): Promise<void> {
  const seen = stream.getSnapshot().entries.map((e) => e.seq);
  const want = (await journalOf(c, room)).map((e) => e.seq).filter((s) => s <= stream.getSnapshot().position);
  expect(new Set(seen).size).toBe(seen.length);
  expect(seen).toEqual(want);
}

/** Submits a question and waits until its answer has started streaming. */
async function midAnswer(c: TurngateClient, stream: RoomStream, room: string, text: string): Promise<string> {
  const turn = await c.submit(room, text);
  await stream.until((s) => (s.turns.find((t) => t.id === turn.id)?.answer.length ?? 0) > 0);
  return turn.id;
}

async function ends(stream: RoomStream, turnId: string) {
  const s = await stream.until((s) => s.turns.find((t) => t.id === turnId)?.terminal != null);
  return s.turns.find((t) => t.id === turnId)!;
}

describe.each<StreamTransport>(['sse', 'ws'])('over %s', (transport) => {
  it('resumes after a dropped socket without a gap or a repeat', async () => {
    const c = await clientFor('alice@example.com', { transport });
    const room = await roomId(c, 'Team room');
    const { stream, states } = follow(c, room);
    await stream.until((s) => s.state === 'live');
    const id = await midAnswer(c, stream, room, 'When is the launch?');
    await ctl('drop');
    const t = await ends(stream, id);
    expect(states).toContain('reconnecting');
    expect(t.state).toBe('COMPLETED');
    const server = await c.turn(id);
    expect(t.answer).toBe(server?.answer);
    await sameAsJournal(c, room, stream);
    c.close();
  });

  it('resumes after kill -9 of every replica, on the replica that replaces them', async () => {
    const c = await clientFor('alice@example.com', { transport });
    const room = await roomId(c, 'Team room');
    const { stream, states } = follow(c, room);
    await stream.until((s) => s.state === 'live');
    const id = await midAnswer(c, stream, room, 'Where is the security policy?');
    await ctl('restart');
    const t = await ends(stream, id);
    expect(states).toContain('reconnecting');
    expect(t.state).toBe('COMPLETED');
    expect(t.answer).toBe((await c.turn(id))?.answer);
    await sameAsJournal(c, room, stream);
    c.close();
  });
});

it('resumes after an orderly restart, whose streams end UNAVAILABLE', async () => {
  const c = await clientFor('alice@example.com');
  const room = await roomId(c, 'Team room');
  const { stream, states, codes } = follow(c, room);
  await stream.until((s) => s.state === 'live');
  await ctl('restart?signal=term');
  await stream.until((s) => s.state === 'live' && states.includes('reconnecting'));
  expect(codes).toContain('UNAVAILABLE');
  const turn = await c.submit(room, 'What changed after the restart?');
  const t = await ends(stream, turn.id);
  expect(t.state).toBe('COMPLETED');
  await sameAsJournal(c, room, stream);
});

it('fails over to another replica when the serving one is killed mid-answer', async () => {
  await ctl('up'); // a second replica behind the front door
  const c = await clientFor('alice@example.com');
  const room = await roomId(c, 'Team room');
  const { stream, states } = follow(c, room);
  await stream.until((s) => s.state === 'live');
  const id = await midAnswer(c, stream, room, 'When is the launch, once more?');
  await ctl('failover');
  const t = await ends(stream, id);
  expect(states).toContain('reconnecting');
  expect(t.state).toBe('COMPLETED');
  expect(t.answer).toBe((await c.turn(id))?.answer);
  await sameAsJournal(c, room, stream);
});

it('goes offline when the retry window runs out, and catches up on retry', async () => {
  const c = await clientFor('alice@example.com', { retry: { windowMs: 1_500, baseDelayMs: 100, maxDelayMs: 400 } });
  const room = await roomId(c, 'Team room');
  const { stream, states, codes } = follow(c, room);
  await stream.until((s) => s.state === 'live');
  const before = Date.now();
  await ctl('down');
  await stream.until((s) => s.state === 'offline');
  expect(Date.now() - before).toBeGreaterThanOrEqual(1_500);
  expect(states).toEqual(['live', 'reconnecting', 'offline']);
  expect(codes.at(-1)).toBe('NETWORK');
  // A read in the outage gives up with the same window.
  await expect(c.me()).rejects.toMatchObject({ code: 'NETWORK' });
  await ctl('up');
  stream.retry();
  await stream.until((s) => s.state === 'live');
  const turn = await c.submit(room, 'Are we back?');
  const t = await ends(stream, turn.id);
  expect(t.state).toBe('COMPLETED');
  await sameAsJournal(c, room, stream);
});
