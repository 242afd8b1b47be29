// The AI SDK transport: journal entries become UI message chunks that the
// AI SDK's own reader folds into the message the server has (checked with
// `ai`'s readUIMessageStream, as useChat reads them), and against a real
// turngate, sendMessages streams a turn once however often it is sent,
// reconnectToStream replays the running turn, an abort cancels it, and a
// kill -9 of the serving replica changes nothing the message shows.
import { readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';

import { TurnChunks, TurngateChatTransport, answerMessageId, idempotencyKey, messageFromChunks, type TurngateUIMessage } from '../src/ai-sdk.js';
import type { Entry, TurngateClient } from '../src/index.js';
import { clientFor, ctl, journalOf, roomId } from './world.js';

function entry(seq: number, kind: Entry['kind'], extra: Partial<Entry> = {}): Entry {
  return {
    id: `r:${seq}`, conversationId: 'r', seq, kind, turnId: 't', attempt: 1, actorId: null, text: null,
    createdAt: '', accepted: null, started: null, delta: null, tool: null, approvalRequest: null, approvalDecision: null, steer: null,
    answer: null, terminal: null, membership: null,
    // The transport reads the deprecated per-kind fields; body is a placeholder.
    body: { __typename: 'CheckpointRecord', steps: 0, toolCalls: 0, messages: 0 }, ...extra,
  };
}
const accepted = (seq: number) => entry(seq, 'TURN_ACCEPTED', { text: 'When?', attempt: 0, accepted: { authorId: 'a', authorName: 'Alice' } });
const started = (seq: number, attempt = 1) => entry(seq, 'TURN_STARTED', { attempt, started: { attempt, agentVersion: 1, recovered: attempt > 1 } });
const delta = (seq: number, offset: number, text: string, attempt = 1) =>
  entry(seq, 'ANSWER_DELTA', { attempt, delta: { id: `r:${seq}`, turnId: 't', seq, attempt, offset, text } });
const answer = (seq: number, text: string, extra: Partial<NonNullable<Entry['answer']>> = {}) =>
  entry(seq, 'TURN_ANSWER', { answer: { text, citations: [], artifacts: [], ...extra } });
const terminal = (seq: number, outcome: 'COMPLETED' | 'FAILED' | 'CANCELLED', reason: NonNullable<Entry['terminal']>['reason'] = 'COMPLETED') =>
  entry(seq, 'TURN_TERMINAL', { terminal: { outcome, reason } });

/** The chunks of entries, for a turn accepted at position 1. */
function chunksOf(...entries: Entry[]): UIMessageChunk[] {
  const m = new TurnChunks({ id: 't', conversationId: 'r', position: 1 });
  return [...m.begin(), ...entries.flatMap((e) => m.push(e))];
}

/** The message useChat makes of chunks: the AI SDK's own reader, to the end. */
async function aiSdkMessage(chunks: UIMessageChunk[]): Promise<UIMessage> {
  let last: UIMessage | undefined;
  const errors: unknown[] = [];
  const stream = new ReadableStream<UIMessageChunk>({
    start(c) {
      for (const x of chunks) c.enqueue(x);
      c.close();
    },
  });
  for await (const m of readUIMessageStream({ stream, onError: (e) => errors.push(e) })) last = m;
  // The only error a valid stream carries is a failed turn's.
  for (const e of errors) expect(String(e)).toMatch(/The turn failed/);
  return JSON.parse(JSON.stringify(last));
}

/** Reads a stream to its end. */
async function drain(s: ReadableStream<UIMessageChunk>): Promise<UIMessageChunk[]> {
  const reader = s.getReader();
  const out: UIMessageChunk[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return out;
    out.push(value);
  }
}

const textOf = (m: UIMessage) => m.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text).join('');
const types = (cs: UIMessageChunk[]) => cs.map((c) => c.type);

describe('TurnChunks', () => {
  it('maps a turn to start, a step of text and tool parts, sources, data parts and finish', async () => {
    const cs = chunksOf(
      accepted(1),
      started(2),
      delta(3, 0, 'Let me look. '),
      entry(4, 'TOOL_REQUESTED', { tool: { callId: 'c1', name: 'retrieval', arguments: { query: 'launch' }, status: null, bytes: null, citations: null } }),
      entry(5, 'TOOL_COMPLETED', { tool: { callId: 'c1', name: 'retrieval', arguments: null, status: 'ok', bytes: 120, citations: ['doc:d1#p0'] } }),
      delta(6, 13, 'It is Friday [doc:d1#p0].'),
      answer(7, 'Let me look. It is Friday [doc:d1#p0].', {
        citations: [
          { id: 't/doc:d1#p0', ref: 'doc:d1#p0', documentId: 'd1', source: 'Launch plan', passage: 'Friday', digest: 'ab' },
          { id: 't/web:1', ref: 'web:1', documentId: null, source: 'https://example.com/launch', passage: 'Fri', digest: null },
        ],
        artifacts: [{ id: 't/f1', artifactId: 'f1', resourceId: null, name: 'plan.csv', mediaType: 'text/csv', size: 9, sha256: 'cd', downloadUrl: '/artifacts/f1' }],
      }),
      terminal(8, 'COMPLETED'),
    );
    expect(types(cs)).toEqual([
      'start', 'start-step', 'message-metadata',
      'text-start', 'text-delta', 'text-end',
      'tool-input-available', 'tool-output-available',
      'text-start', 'text-delta', 'text-end',
      'source-document', 'source-url', 'data-artifact',
      'finish-step', 'message-metadata', 'finish',
    ]);
    expect(cs[0]).toMatchObject({ messageId: answerMessageId('t') });
    expect(cs.at(-1)).toMatchObject({ finishReason: 'stop', messageMetadata: { turnId: 't', state: 'COMPLETED', reason: 'COMPLETED', authorName: 'Alice', attempt: 1 } });
    const m = await aiSdkMessage(cs);
    expect(textOf(m)).toBe('Let me look. It is Friday [doc:d1#p0].');
    expect(m.parts.find((p) => p.type === 'dynamic-tool')).toMatchObject({ toolName: 'retrieval', state: 'output-available', input: { query: 'launch' }, output: { status: 'ok' } });
    expect(m.parts.filter((p) => p.type.startsWith('source-')).map((p) => (p as { sourceId: string }).sourceId)).toEqual(['doc:d1#p0', 'web:1']);
    // History folds the same chunks into the same message.
    expect(JSON.parse(JSON.stringify(messageFromChunks(cs)))).toEqual(m);
  });

  it('places deltas by offset: a repeat overlaps, never duplicates; other turns and old positions change nothing', async () => {
    const m = new TurnChunks({ id: 't', conversationId: 'r', position: 1 });
    const cs = [...m.begin(), ...m.push(accepted(1)), ...m.push(started(2)), ...m.push(delta(3, 0, 'Hello, '))];
    expect(m.push(delta(3, 0, 'Hello, '))).toEqual([]); // the same position again
    cs.push(...m.push(delta(4, 4, 'o, world'))); // overlaps "o, " (bytes 4-6)
    cs.push(...m.push({ ...delta(5, 0, 'elsewhere'), turnId: 'other' }));
    cs.push(...m.push(delta(6, 12, '! ✓'))); // bytes, not UTF-16 units, count
    cs.push(...m.push(delta(7, 14, '✓ done'))); // overlaps the ✓ (bytes 14-16)
    cs.push(...m.push(answer(8, 'Hello, world! ✓ done')), ...m.push(terminal(9, 'COMPLETED')));
    expect(textOf(await aiSdkMessage(cs))).toBe('Hello, world! ✓ done');
    expect(types(cs)).not.toContain('reset-step');
  });

  it('shows a new attempt after the interrupted one, and ends as the published answer', async () => {
    const cs = chunksOf(
      accepted(1), started(2), delta(3, 0, 'First dr'),
      started(4, 2), delta(5, 0, 'Second '), delta(6, 7, 'draft'),
      answer(7, 'Second draft, published.'),
      terminal(8, 'COMPLETED'),
    );
    const m = await aiSdkMessage(cs);
    // Attempt 1's text stays as shown, in its own step; attempt 2 starts
    // with its marker; the published answer redraws attempt 2's step.
    const shape = m.parts.map((p) => (p.type === 'text' ? `text:${(p as { text: string }).text}` : p.type));
    expect(shape).toEqual(['step-start', 'text:First dr', 'step-start', 'data-attempt', 'text:Second draft, published.']);
    expect(m.parts[3]).toMatchObject({ data: { attempt: 2, interrupted: 1 } });
    expect(m.metadata).toMatchObject({ attempt: 2, state: 'COMPLETED' });
    expect(JSON.parse(JSON.stringify(messageFromChunks(cs)))).toEqual(m);
  });

  it('updates approvals and steers in place, and ends a failed turn with error, a cancelled one with abort', async () => {
    const request = { approvalId: 'ap1', tool: 'send_email', arguments: { to: 'x' }, expiresAt: '2030-01-01T00:00:00Z' };
    const cs = chunksOf(
      accepted(1), started(2),
      entry(3, 'APPROVAL_REQUESTED', { approvalRequest: request }),
      entry(4, 'APPROVAL_DECIDED', { approvalDecision: { approvalId: 'ap1', state: 'APPROVED', decidedBy: 'a' } }),
      entry(5, 'STEER_DELIVERED', { steer: { commandId: 's1', actorId: 'a', text: 'be brief', state: 'DELIVERED' } }),
      terminal(6, 'FAILED', 'BUDGET_EXHAUSTED'),
    );
    expect(cs.at(-1)).toEqual({ type: 'error', errorText: 'The turn failed: BUDGET_EXHAUSTED' });
    const m = await aiSdkMessage(cs);
    expect(m.parts.filter((p) => p.type === 'data-approval')).toEqual([{ type: 'data-approval', id: 'ap1', data: { ...request, state: 'APPROVED', decidedBy: 'a' } }]);
    expect(m.parts.find((p) => p.type === 'data-steer')).toMatchObject({ id: 's1', data: { text: 'be brief', state: 'DELIVERED' } });
    expect(chunksOf(accepted(1), started(2), terminal(3, 'CANCELLED', 'CANCELLED_BY_MEMBER')).at(-1)).toEqual({ type: 'abort', reason: 'CANCELLED_BY_MEMBER' });
  });

  it('makes idempotency keys from message ids, hashing what the key alphabet lacks', async () => {
    expect(await idempotencyKey('aB3dE')).toBe('ai-sdk:aB3dE');
    expect(await idempotencyKey('aB3dE', 'answer:t1')).toBe('ai-sdk:aB3dE:re:answer:t1');
    const odd = await idempotencyKey('message #1 / with spaces');
    expect(odd).toMatch(/^ai-sdk:h:[0-9a-f]{40}$/);
    expect(await idempotencyKey('message #1 / with spaces')).toBe(odd);
  });
});

describe('TurngateChatTransport against a server', () => {
  const clients: TurngateClient[] = [];
  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
  });
  async function setup() {
    const client = await clientFor('alice@example.com');
    clients.push(client);
    const room = await roomId(client, 'Team room');
    return { client, room, transport: new TurngateChatTransport({ client }) };
  }
  const user = (id: string, text: string): TurngateUIMessage => ({ id, role: 'user', parts: [{ type: 'text', text }] });
  const send = (t: TurngateChatTransport, room: string, msg: TurngateUIMessage, abortSignal?: AbortSignal) =>
    t.sendMessages({ trigger: 'submit-message', chatId: room, messageId: undefined, messages: [msg], abortSignal });
  const turnIdOf = (cs: UIMessageChunk[]) => (cs[0] as { messageId: string }).messageId.replace(/^answer:/, '');

  /** Reads s until pred holds of the chunks so far; returns the reader, still open. */
  async function readUntil(s: ReadableStream<UIMessageChunk>, pred: (cs: UIMessageChunk[]) => boolean) {
    const reader = s.getReader();
    const seen: UIMessageChunk[] = [];
    while (!pred(seen)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended first: ${types(seen).join(' ')}`);
      seen.push(value);
    }
    return { reader, seen };
  }
  async function rest(r: { reader: ReadableStreamDefaultReader<UIMessageChunk>; seen: UIMessageChunk[] }) {
    for (;;) {
      const { value, done } = await r.reader.read();
      if (done) return r.seen;
      r.seen.push(value);
    }
  }

  it('streams a sent message\'s turn as the server has it, and a re-send is the same turn', async () => {
    const { client, room, transport } = await setup();
    const msg = user(`m${Date.now()}`, 'When is the launch?');
    const cs = await drain(await send(transport, room, msg));
    const turnId = turnIdOf(cs);
    const server = await client.turn(turnId);
    expect(server?.state).toBe('COMPLETED');
    expect(server?.idempotencyKey).toBe(`ai-sdk:${msg.id}`);
    expect(types(cs)).toEqual(expect.arrayContaining(['start', 'start-step', 'text-delta', 'tool-input-available', 'tool-output-available', 'source-document', 'finish']));
    expect(types(cs)).not.toContain('reset-step');
    const m = await aiSdkMessage(cs);
    expect(textOf(m)).toBe(server?.answer);
    // Sent again (a retry after a lost response): the same turn, the same message.
    const again = await drain(await send(transport, room, msg));
    expect(turnIdOf(again)).toBe(turnId);
    expect(await aiSdkMessage(again)).toEqual(m);
    const turns = (await journalOf(client, room)).filter((e) => e.kind === 'TURN_ACCEPTED' && e.text === 'When is the launch?');
    expect(turns.filter((e) => e.turnId === turnId)).toHaveLength(1);
    // History reads the turn as the stream drew it.
    const history = await transport.loadMessages(room);
    const i = history.findIndex((h) => h.id === answerMessageId(turnId));
    expect(history[i - 1]).toMatchObject({ role: 'user', parts: [{ type: 'text', text: 'When is the launch?' }] });
    expect(JSON.parse(JSON.stringify(history[i]))).toEqual(m);
  });

  it('reconnects to the running turn by replaying it from its acceptance, and to nothing when none runs', async () => {
    const { client, room, transport } = await setup();
    const first = await readUntil(await send(transport, room, user(`m${Date.now()}`, 'Where is the security policy?')), (cs) => cs.some((c) => c.type === 'text-delta'));
    const turnId = turnIdOf(first.seen);
    // A reload: the first page's stream is gone; the new one reconnects.
    await first.reader.cancel();
    const resumed = await transport.reconnectToStream({ chatId: room });
    expect(resumed).not.toBeNull();
    const cs = await drain(resumed!);
    expect(turnIdOf(cs)).toBe(turnId);
    const server = await client.turn(turnId);
    expect(server?.state).toBe('COMPLETED'); // the reader's cancel is no stop: the turn ran on
    expect(textOf(await aiSdkMessage(cs))).toBe(server?.answer);
    expect(await transport.reconnectToStream({ chatId: room })).toBeNull();
  });

  it('cancels the turn when the request is aborted (useChat\'s stop)', async () => {
    const { client, room, transport } = await setup();
    const stop = new AbortController();
    const r = await readUntil(await send(transport, room, user(`m${Date.now()}`, 'What changed this week?'), stop.signal), (cs) => cs.some((c) => c.type === 'text-delta'));
    const turnId = turnIdOf(r.seen);
    stop.abort();
    await r.reader.cancel();
    const stream = client.room(room);
    try {
      const s = await stream.until((s) => s.turns.find((t) => t.id === turnId)?.terminal != null);
      expect(s.turns.find((t) => t.id === turnId)?.terminal).toEqual({ outcome: 'CANCELLED', reason: 'CANCELLED_BY_MEMBER' });
    } finally {
      stream.stop();
    }
    expect((await client.turn(turnId))?.state).toBe('CANCELLED');
  });

  it('does not cancel when an aborted request is handed over to the next of the chat (a resume replacing a resume)', async () => {
    const { client, room, transport } = await setup();
    const r = await readUntil(await send(transport, room, user(`m${Date.now()}`, 'Who decided the launch date?')), (cs) => cs.some((c) => c.type === 'text-delta'));
    const turnId = turnIdOf(r.seen);
    await r.reader.cancel();
    const first = new AbortController();
    const replaced = await transport.reconnectToStream({ chatId: room, abortSignal: first.signal });
    // useChat aborts a resume right before it makes the one replacing it
    // (React's StrictMode mounts twice).
    first.abort();
    const next = transport.reconnectToStream({ chatId: room });
    await replaced?.cancel();
    const cs = await drain((await next)!);
    expect(turnIdOf(cs)).toBe(turnId);
    expect(cs.at(-1)).toMatchObject({ type: 'finish' });
    expect((await client.turn(turnId))?.state).toBe('COMPLETED');
  });

  it('keeps streaming through kill -9 of the serving replica, and the message is the server\'s answer', async () => {
    await ctl('up'); // a second replica behind the front door
    const { client, room, transport } = await setup();
    const r = await readUntil(await send(transport, room, user(`m${Date.now()}`, 'When is the launch, and who decided it?')), (cs) => cs.filter((c) => c.type === 'text-delta').length >= 3);
    await ctl('failover');
    const cs = await rest(r);
    const turnId = turnIdOf(cs);
    const server = await client.turn(turnId);
    expect(server?.state).toBe('COMPLETED');
    const m = await aiSdkMessage(cs);
    expect(textOf(m.parts.some((p) => p.type === 'data-attempt') ? { ...m, parts: m.parts.slice(m.parts.findIndex((p) => p.type === 'data-attempt')) } : m)).toBe(server?.answer);
  });

  it('shows a steer as a data part, and ends as the published answer', async () => {
    const { client, room, transport } = await setup();
    const r = await readUntil(await send(transport, room, user(`m${Date.now()}`, 'Tell me about the launch plan, in detail')), (cs) => cs.some((c) => c.type === 'text-delta'));
    const turnId = turnIdOf(r.seen);
    const { commandId } = await client.steer(turnId, 'mention the date');
    const cs = await rest(r);
    const m = await aiSdkMessage(cs);
    const server = await client.turn(turnId);
    expect(m.parts.find((p) => p.type === 'data-steer')).toMatchObject({ id: commandId, data: { text: 'mention the date', state: 'DELIVERED' } });
    expect(textOf(m)).toBe(server?.answer);
  });
});
