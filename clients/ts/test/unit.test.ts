// The client's pure parts: backoff with jitter, and folding entries.
import { describe, expect, it } from 'vitest';

import { backoff, defaultRetry, TurnFolder, type Entry } from '../src/index.js';
import { isRetryable } from '../src/errors.js';

function entry(seq: number, kind: Entry['kind'], extra: Partial<Entry> = {}): Entry {
  return {
    id: `r:${seq}`, conversationId: 'r', seq, kind, turnId: 't', attempt: 1, actorId: null, text: null,
    createdAt: '', accepted: null, started: null, delta: null, tool: null, approvalRequest: null, approvalDecision: null, steer: null,
    answer: null, terminal: null, membership: null,
    // The fold reads the deprecated per-kind fields; body is a placeholder.
    body: { __typename: 'CheckpointRecord', steps: 0, toolCalls: 0, messages: 0 }, ...extra,
  };
}
const delta = (seq: number, offset: number, text: string, attempt = 1) =>
  entry(seq, 'ANSWER_DELTA', { delta: { id: `r:${seq}`, turnId: 't', seq, attempt, offset, text } });

describe('backoff', () => {
  it('is full jitter under a doubling bound, capped, with the server\'s retryAfter as a floor', () => {
    expect(backoff(defaultRetry, 0, 0, () => 1)).toBe(250);
    expect(backoff(defaultRetry, 3, 0, () => 1)).toBe(2_000);
    expect(backoff(defaultRetry, 30, 0, () => 1)).toBe(5_000);
    expect(backoff(defaultRetry, 3, 0, () => 0)).toBe(0);
    expect(backoff(defaultRetry, 0, 900, () => 0.5)).toBe(900);
  });
  it('retries only network, RATE_LIMITED and UNAVAILABLE', () => {
    expect(['NETWORK', 'RATE_LIMITED', 'UNAVAILABLE'].every((c) => isRetryable(c as never))).toBe(true);
    expect(['UNAUTHENTICATED', 'FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT', 'CONFLICT', 'INTERNAL'].some((c) => isRetryable(c as never))).toBe(false);
  });
});

describe('TurnFolder', () => {
  it('ignores entries at or below its position, and places deltas by offset', () => {
    const f = new TurnFolder();
    f.apply(entry(1, 'TURN_ACCEPTED', { text: 'q', accepted: { authorId: 'a', authorName: 'Alice' } }));
    f.apply(entry(2, 'TURN_STARTED', { started: { attempt: 1, agentVersion: 1, recovered: false } }));
    f.apply(delta(3, 0, 'Hello, '));
    expect(f.apply(delta(3, 0, 'Hello, '))).toBe(false);
    f.apply(delta(4, 7, 'world'));
    expect(f.get('t')?.answer).toBe('Hello, world');
    // A recovered attempt starts its answer again at offset 0.
    f.apply(entry(5, 'TURN_STARTED', { attempt: 2, started: { attempt: 2, agentVersion: 1, recovered: true } }));
    f.apply(delta(6, 0, 'Hi', 2));
    expect(f.get('t')?.answer).toBe('Hi');
    expect(f.get('t')?.attempt).toBe(2);
  });
  it('marks the partial answer of an interrupted attempt, and shows the new attempt\'s text alone', () => {
    const started = (seq: number, attempt: number) =>
      entry(seq, 'TURN_STARTED', { attempt, started: { attempt, agentVersion: 1, recovered: attempt > 1 } });
    const answer = entry(20, 'TURN_ANSWER', { attempt: 2, answer: { text: 'Launch: Tuesday, decided by Ana.', citations: [], artifacts: [] } });
    const cases: [string, Entry[]][] = [
      ['the new attempt starts', [started(5, 2), delta(6, 0, 'Launch: Tuesday', 2), delta(7, 15, ', decided by Ana.', 2), answer]],
      // A stream that starts its attempt with a delta still marks the boundary.
      ['the new attempt\'s first delta', [delta(6, 0, 'Launch: Tuesday', 2), delta(7, 15, ', decided by Ana.', 2), answer]],
    ];
    for (const [name, entries] of cases) {
      const f = new TurnFolder();
      f.apply(entry(1, 'TURN_ACCEPTED', { text: 'When is the launch?' }));
      f.apply(started(2, 1));
      f.apply(delta(3, 0, 'The launch is on '));
      f.apply(delta(4, 17, 'Mon'));
      const [first, ...rest] = entries;
      f.apply(first!);
      expect({ name, answer: f.get('t')?.answer, interrupted: f.get('t')?.interrupted }).toEqual({
        name, answer: first!.kind === 'ANSWER_DELTA' ? 'Launch: Tuesday' : '', interrupted: [{ attempt: 1, text: 'The launch is on Mon' }],
      });
      for (const e of rest) f.apply(e);
      const t = f.get('t');
      // Never the two attempts joined: the answer is attempt 2's, the
      // partial is kept apart, marked interrupted.
      expect({ name, answer: t?.answer, answered: t?.answered, attempt: t?.attempt, interrupted: t?.interrupted }).toEqual({
        name, answer: 'Launch: Tuesday, decided by Ana.', answered: true, attempt: 2, interrupted: [{ attempt: 1, text: 'The launch is on Mon' }],
      });
    }
    // An attempt that had streamed nothing leaves nothing to mark.
    const f = new TurnFolder();
    f.apply(entry(1, 'TURN_ACCEPTED', { text: 'q' }));
    f.apply(started(2, 1));
    f.apply(started(3, 2));
    f.apply(delta(4, 0, 'Hi', 2));
    expect({ answer: f.get('t')?.answer, interrupted: f.get('t')?.interrupted }).toEqual({ answer: 'Hi', interrupted: [] });
    // A turn withheld from the viewer keeps no text of any attempt.
    const w = new TurnFolder();
    w.apply(entry(1, 'TURN_ACCEPTED', { text: 'q' }));
    w.apply(started(2, 1));
    w.apply(delta(3, 0, 'Secret plan'));
    w.apply(started(4, 2));
    w.apply(entry(5, 'TURN_TERMINAL', { terminal: { outcome: 'COMPLETED', reason: 'AUDIENCE_WITHHELD' } }));
    expect({ answer: w.get('t')?.answer, interrupted: w.get('t')?.interrupted }).toEqual({ answer: '', interrupted: [] });
  });
  it('replaces a draft the run discarded, after a steer or a tool request, rather than adding to it', () => {
    const steer = (seq: number) =>
      entry(seq, 'STEER_DELIVERED', { steer: { commandId: 'c1', actorId: 'a', text: 'shorter', state: 'DELIVERED' } });
    const tool = (seq: number, kind: 'TOOL_REQUESTED' | 'TOOL_COMPLETED') =>
      entry(seq, kind, { tool: { callId: 'k1', name: 'retrieval', arguments: null, status: kind === 'TOOL_COMPLETED' ? 'ok' : null, bytes: null, citations: null } });
    const final = (seq: number, text: string) => entry(seq, 'TURN_ANSWER', { answer: { text, citations: [], artifacts: [] } });
    const cases: [string, Entry[], string, string][] = [
      // The server keeps counting offsets through the attempt: the second
      // draft starts at 16, where the first one ended.
      ['a steer delivered after the last step', [delta(3, 0, 'A long answer. '), delta(4, 15, '!'), steer(5), entry(6, 'CHECKPOINT'),
        delta(7, 16, 'Short'), delta(8, 21, ' one.')], 'Short one.', 'Short one.'],
      ['text before a tool request', [delta(3, 0, 'Let me look. '), tool(4, 'TOOL_REQUESTED'), tool(5, 'TOOL_COMPLETED'), entry(6, 'CHECKPOINT'),
        delta(7, 13, 'Found it.')], 'Found it.', 'Found it.'],
      ['two steers, one draft each', [delta(3, 0, 'One. '), steer(4), delta(5, 5, 'Two. '), steer(6), delta(7, 10, 'Three.')], 'Three.', 'Three.'],
      ['a steer before any text', [steer(3), delta(4, 0, 'Only.')], 'Only.', 'Only.'],
    ];
    for (const [name, entries, streamed, published] of cases) {
      const f = new TurnFolder();
      f.apply(entry(1, 'TURN_ACCEPTED', { text: 'q' }));
      f.apply(entry(2, 'TURN_STARTED', { started: { attempt: 1, agentVersion: 1, recovered: false } }));
      for (const e of entries) f.apply(e);
      expect({ name, answer: f.get('t')?.answer }).toEqual({ name, answer: streamed });
      f.apply(final(30, published));
      expect({ name, answer: f.get('t')?.answer, interrupted: f.get('t')?.interrupted }).toEqual({ name, answer: published, interrupted: [] });
    }
  });
  it('counts the unfinished turns ahead of a waiting one', () => {
    const f = new TurnFolder();
    const accepted = (seq: number, id: string) => entry(seq, 'TURN_ACCEPTED', { turnId: id, text: id });
    f.apply(accepted(1, 'a'));
    f.apply(accepted(2, 'b'));
    f.apply(accepted(3, 'c'));
    expect(f.turns().map((t) => t.queuePosition)).toEqual([0, 1, 2]);
    f.apply(entry(4, 'TURN_STARTED', { turnId: 'a' }));
    expect(f.turns().map((t) => t.queuePosition)).toEqual([null, 1, 2]);
    f.apply(entry(5, 'TURN_TERMINAL', { turnId: 'a', terminal: { outcome: 'COMPLETED', reason: 'COMPLETED' } }));
    expect(f.turns().map((t) => t.queuePosition)).toEqual([null, 0, 1]);
  });
  it('shows a withheld turn as the notice alone, however its deltas came', () => {
    const notice = 'withheld here';
    const answer = entry(10, 'TURN_ANSWER', { answer: { text: notice, citations: [], artifacts: [] } });
    const terminal = entry(11, 'TURN_TERMINAL', { terminal: { outcome: 'COMPLETED', reason: 'AUDIENCE_WITHHELD' } });
    const cases: [string, Entry[], string][] = [
      ['replayed: empty deltas, then the notice', [delta(3, 0, ''), delta(4, 7, ''), answer, terminal], notice],
      ['live: text streamed before it was withheld', [delta(3, 0, 'Hello, '), delta(4, 7, 'world'), answer, terminal], notice],
      ['no answer published', [delta(3, 0, 'Hello, '), terminal], ''],
    ];
    for (const [name, entries, want] of cases) {
      const f = new TurnFolder();
      f.apply(entry(1, 'TURN_ACCEPTED', { text: 'q' }));
      f.apply(entry(2, 'TURN_STARTED', { started: { attempt: 1, agentVersion: 1, recovered: false } }));
      for (const e of entries) f.apply(e);
      expect({ name, answer: f.get('t')?.answer, withheld: f.get('t')?.withheld }).toEqual({ name, answer: want, withheld: true });
    }
  });
});
