// Submits, commands and the retry rule against a real turngate.
import { afterEach, describe, expect, it } from 'vitest';

import { newId, type RoomStream, type TurngateClient } from '../src/index.js';
import { SubmitMessageDocument } from '../src/generated/graphql.js';
import { clientFor, countingFetch, journalOf, roomId, token, url } from './world.js';

const open: RoomStream[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.stop();
});

function follow(c: TurngateClient, room: string): RoomStream {
  const s = c.room(room);
  open.push(s);
  return s;
}

/** The turn_accepted entries of a room whose text is text. */
async function acceptedWith(c: TurngateClient, room: string, text: string) {
  return (await journalOf(c, room)).filter((e) => e.kind === 'TURN_ACCEPTED' && e.text === text);
}

describe('submit', () => {
  it('re-sends the same idempotency key when the answer is lost, and makes one turn', async () => {
    // The first two submissions reach the server, but their answers are
    // lost on the way back, as a dropped connection would lose them.
    let submits = 0;
    const lossy: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (typeof init?.body === 'string' && init.body.includes('submitMessage') && ++submits <= 2) {
        throw new TypeError('fetch failed: connection reset');
      }
      return res;
    };
    const t = await token('alice@example.com');
    const { createClient } = await import('../src/index.js');
    const c = createClient({ url, identity: () => t, fetch: lossy, retry: { baseDelayMs: 50, maxDelayMs: 200 } });
    const room = await roomId(c, "Alice's notes");
    const text = `one turn however often retried ${newId()}`;
    const turn = await c.submit(room, text);
    expect(submits).toBe(3);
    const accepted = await acceptedWith(c, room, text);
    expect(accepted).toHaveLength(1);
    expect(accepted[0].turnId).toBe(turn.id);
  });

  it('keeps the key it was given: a second submit with it returns the same turn', async () => {
    const c = await clientFor('alice@example.com');
    const room = await roomId(c, "Alice's notes");
    const key = `key-${newId()}`;
    const a = await c.submit(room, 'same key', { idempotencyKey: key });
    const b = await c.submit(room, 'same key', { idempotencyKey: key });
    expect(b.id).toBe(a.id);
    expect(a.idempotencyKey).toBe(key);
  });

  it('retries RATE_LIMITED submits with their keys until each is accepted once', async () => {
    const counter = countingFetch();
    const c = await clientFor('bob@example.com', { fetch: counter.fetch });
    const room = await roomId(c, "Bob's notes");
    const batch = newId();
    const texts = Array.from({ length: 8 }, (_, i) => `burst ${i} ${batch}`);
    const turns = await Promise.all(texts.map((t) => c.submit(room, t)));
    expect(counter.codes).toContain('RATE_LIMITED');
    expect(new Set(turns.map((t) => t.id)).size).toBe(8);
    const journal = await journalOf(c, room);
    for (const text of texts) {
      expect(journal.filter((e) => e.kind === 'TURN_ACCEPTED' && e.text === text)).toHaveLength(1);
    }
  });
});

describe('the retry rule', () => {
  it('fails closed on UNAUTHENTICATED after asking identity once more', async () => {
    const counter = countingFetch();
    let asked = 0;
    const { createClient } = await import('../src/index.js');
    const c = createClient({ url, identity: () => (asked++, 'not-an-envelope'), fetch: counter.fetch });
    await expect(c.me()).rejects.toMatchObject({ code: 'UNAUTHENTICATED', retryable: false });
    expect(asked).toBe(2);
    expect(counter.requests()).toBe(1);
    const s = follow(c, newId());
    await expect(s.until(() => false)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    expect(s.getSnapshot().state).toBe('closed');
  });

  it('uses a refreshed envelope after UNAUTHENTICATED', async () => {
    const good = await token('alice@example.com');
    let asked = 0;
    const { createClient } = await import('../src/index.js');
    const c = createClient({ url, identity: () => (asked++ === 0 ? 'expired-envelope' : good) });
    expect((await c.me()).email).toBe('alice@example.com');
    expect(asked).toBe(2);
    // A stream too: refused, it asks once more and goes live with the new envelope.
    let streamAsked = 0;
    const d = createClient({ url, identity: () => (streamAsked++ === 0 ? 'expired-envelope' : good) });
    const room = await roomId(c, 'Team room');
    const s = follow(d, room);
    await s.until((x) => x.state === 'live' && x.entries.length > 0);
    expect(streamAsked).toBe(2);
  });

  it('fails closed on NOT_FOUND: bob following alice\'s private room makes one request', async () => {
    const alice = await clientFor('alice@example.com');
    const privateRoom = await roomId(alice, "Alice's notes");
    const counter = countingFetch();
    const bob = await clientFor('bob@example.com', { fetch: counter.fetch });
    const s = follow(bob, privateRoom);
    await expect(s.until(() => false)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(s.getSnapshot().state).toBe('closed');
    expect(s.getSnapshot().entries).toHaveLength(0);
    // One request, or two when a loaded server answered the first
    // UNAVAILABLE (retryable): NOT_FOUND itself is never retried.
    expect(counter.requests()).toBeLessThanOrEqual(2);
    await expect(bob.conversation(privateRoom)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('fails closed on FORBIDDEN: bob cannot cancel alice\'s turn, and nothing is retried', async () => {
    const alice = await clientFor('alice@example.com');
    const room = await roomId(alice, 'Team room');
    const turn = await alice.submit(room, 'A turn bob may not cancel');
    const counter = countingFetch();
    const bob = await clientFor('bob@example.com', { fetch: counter.fetch });
    await expect(bob.cancel(turn.id)).rejects.toMatchObject({ code: 'FORBIDDEN', retryable: false });
    // Only a RATE_LIMITED answer (bob's command bucket) is sent again.
    expect(counter.codes.filter((c) => c !== 'RATE_LIMITED')).toEqual(['FORBIDDEN']);
    expect(counter.requests()).toBe(counter.codes.length);
  });

  it('does not retry BAD_USER_INPUT or CONFLICT', async () => {
    const counter = countingFetch();
    const c = await clientFor('alice@example.com', { fetch: counter.fetch });
    const room = await roomId(c, "Alice's notes");
    await expect(c.submit(room, '   ')).rejects.toMatchObject({ code: 'BAD_USER_INPUT' });
    const key = `conflict-${newId()}`;
    await c.submit(room, 'first text', { idempotencyKey: key });
    await expect(c.submit(room, 'other text', { idempotencyKey: key })).rejects.toMatchObject({ code: 'CONFLICT' });
    // The room lookup, then three submits; only a RATE_LIMITED answer is sent again.
    expect(counter.codes.filter((c) => c !== 'RATE_LIMITED')).toEqual(['BAD_USER_INPUT', 'CONFLICT']);
    expect(counter.requests() - counter.codes.filter((c) => c === 'RATE_LIMITED').length).toBe(1 + 3);
  });

  it('never re-sends a mutation without a key', async () => {
    let sent = 0;
    const failing: typeof fetch = async (input, init) => {
      if (typeof init?.body === 'string' && init.body.includes('mutation')) {
        sent++;
        throw new TypeError('fetch failed');
      }
      return fetch(input, init);
    };
    const c = await clientFor('alice@example.com', { fetch: failing });
    await expect(c.createConversation('never twice', 'PRIVATE')).rejects.toMatchObject({ code: 'NETWORK' });
    expect(sent).toBe(1);
    // The raw mutation path does not retry either, whatever it carries.
    await expect(c.mutate(SubmitMessageDocument, { input: { conversationId: newId(), text: 'x', idempotencyKey: 'k' } })).rejects.toMatchObject({ code: 'NETWORK' });
    expect(sent).toBe(2);
  });
});

describe('the turn view', () => {
  it('shows tool activity, citations, the answer and the terminal of a turn', async () => {
    const c = await clientFor('alice@example.com');
    const room = await roomId(c, 'Team room');
    const s = follow(c, room);
    const turn = await c.submit(room, 'When is the launch?');
    const snap = await s.until((x) => x.turns.find((t) => t.id === turn.id)?.terminal != null);
    const t = snap.turns.find((x) => x.id === turn.id)!;
    expect(t.state).toBe('COMPLETED');
    expect(t.terminal).toEqual({ outcome: 'COMPLETED', reason: 'COMPLETED' });
    expect(t.tools.length).toBeGreaterThan(0);
    expect(t.tools.every((x) => x.status === 'ok')).toBe(true);
    expect(t.citations.length).toBeGreaterThan(0);
    expect(t.citations.every((x) => x.id.startsWith(turn.id + '/') && t.answer.includes(`[${x.ref}]`))).toBe(true);
    expect(t.answered).toBe(true);
    expect(t.authorName).toBe('Alice');
    expect(t.input).toBe('When is the launch?');
  });

  it("reads a turn's replay: its model calls in order, the last one the answer", async () => {
    const c = await clientFor('alice@example.com');
    const room = await roomId(c, 'Team room');
    const s = follow(c, room);
    const turn = await c.submit(room, 'When is the launch?');
    const snap = await s.until((x) => x.turns.find((t) => t.id === turn.id)?.terminal != null);
    const t = snap.turns.find((x) => x.id === turn.id)!;
    const replay = await c.replay(turn.id);
    const calls = replay?.modelCalls ?? [];
    expect(calls.length).toBeGreaterThan(1);
    expect(calls.map((m) => m.step)).toEqual(calls.map((_, i) => i + 1));
    expect(calls[0].toolCalls.length).toBeGreaterThan(0);
    expect(calls.at(-1)!.text).toBe(t.answer);
  });

  it('gives a waiting turn its place in the lane', async () => {
    const c = await clientFor('alice@example.com');
    const room = await roomId(c, "Alice's notes");
    const s = follow(c, room);
    const first = await c.submit(room, 'first in the lane, with a longer question to answer?');
    const second = await c.submit(room, 'second in the lane');
    // The snapshot taken as the second turn appears: its queue position is
    // the number of turns before it the journal had not yet ended.
    const snap = await s.until((x) => x.turns.some((t) => t.id === second.id));
    const journal = await journalOf(c, room);
    const acceptedAt = journal.find((e) => e.turnId === second.id && e.kind === 'TURN_ACCEPTED')!.seq;
    const unfinishedAhead = snap.turns.filter((t) => t.position < acceptedAt && !journal.some((e) => e.turnId === t.id && e.kind === 'TURN_TERMINAL' && e.seq < acceptedAt)).length;
    const view = snap.turns.find((t) => t.id === second.id)!;
    expect(view.state).toBe('QUEUED');
    expect(view.queuePosition).toBe(unfinishedAhead);
    expect(snap.turns.map((t) => t.id)).toContain(first.id);
    await s.until((x) => x.turns.find((t) => t.id === second.id)?.state === 'COMPLETED');
    expect(s.turn(second.id)?.queuePosition).toBeNull();
  });

  it('steers a running turn with a command id a retry reuses', async () => {
    const c = await clientFor('alice@example.com');
    const room = await roomId(c, "Alice's notes");
    const s = follow(c, room);
    const turn = await c.submit(room, 'Tell me about the launch, at length?');
    await s.until((x) => x.turns.find((t) => t.id === turn.id)?.state === 'RUNNING');
    const commandId = newId();
    const first = await c.steer(turn.id, 'mention the weather', { commandId });
    const again = await c.steer(turn.id, 'mention the weather', { commandId });
    expect(again.commandId).toBe(first.commandId);
    const snap = await s.until((x) => x.turns.find((t) => t.id === turn.id)?.terminal != null);
    const t = snap.turns.find((x) => x.id === turn.id)!;
    expect(t.steers).toHaveLength(1);
    expect(t.steers[0].commandId).toBe(commandId);
    expect(t.steers[0].state).toBe('DELIVERED');
    expect(t.answer).toContain('mention the weather');
  });

  it('cancels a running turn; the retried cancel converges', async () => {
    const c = await clientFor('alice@example.com');
    const room = await roomId(c, "Alice's notes");
    const s = follow(c, room);
    const turn = await c.submit(room, 'A long answer I will stop?');
    await s.until((x) => (x.turns.find((t) => t.id === turn.id)?.answer.length ?? 0) > 0);
    const commandId = newId();
    await c.cancel(turn.id, { commandId });
    const again = await c.cancel(turn.id, { commandId });
    const snap = await s.until((x) => x.turns.find((t) => t.id === turn.id)?.terminal != null);
    const t = snap.turns.find((x) => x.id === turn.id)!;
    expect(t.state).toBe('CANCELLED');
    expect(t.terminal?.reason).toBe('CANCELLED_BY_MEMBER');
    // The retry converges on the same command (the turn may still be RUNNING as it answers).
    expect(again.commandId).toBe(commandId);
    expect(again.result.id).toBe(turn.id);
    const terminals = (await journalOf(c, room)).filter((e) => e.turnId === turn.id && e.kind === 'TURN_TERMINAL');
    expect(terminals).toHaveLength(1);
  });
});
