/**
 * @turngate/client/ai-sdk: a ChatTransport for the AI SDK's useChat
 * (`ai` 7, `@ai-sdk/react` 4), so a React chat built on useChat (or on
 * assistant-ui's AI SDK runtime) talks to a turngate room:
 *
 *   const transport = new TurngateChatTransport({ client });
 *   const initial = await transport.loadMessages(roomId);
 *   const chat = useChat({ id: roomId, messages: initial, transport, resume: true });
 *
 * The chat's id is the room. sendMessage submits the last user message
 * with an idempotency key made from its message id, so a retried send is
 * one turn, and streams that turn from the room's journal as UI message
 * chunks; the stream rides the client's room stream, which resumes across
 * dropped connections and replicas. reconnectToStream (useChat's resume)
 * replays the room's active turn from its acceptance, so a reloaded page
 * shows the answer whole and then follows it. stop() cancels the turn.
 *
 * Only types come from `ai`: this module adds nothing to a bundle but
 * itself.
 */
import type { ChatRequestOptions, ChatTransport, UIMessage, UIMessageChunk } from 'ai';

import type { TurngateClient } from './client.js';
import { JournalDocument, TypedDocumentString, type ApprovalState, type TerminalReason, type TurnState } from './generated/graphql.js';
import type { JsonValue } from './json.js';
import type { RoomStream } from './room.js';
import type { Entry } from './turns.js';

/** What an assistant message's metadata says of its turn. */
export interface TurnMetadata {
  turnId: string;
  roomId: string;
  /** The journal position of the turn's acceptance. */
  position: number;
  /** Who sent the message (in a shared room, not always the viewer). */
  authorName: string;
  state: TurnState;
  /** The run attempt the answer comes from; more than 1 after a recovery. */
  attempt: number;
  /** Why the turn ended, once it has. */
  reason: TerminalReason | null;
}

/** An approval the turn waits on (data-approval; decide it with client.decideApproval). */
export interface ApprovalData {
  approvalId: string;
  tool: string;
  arguments: JsonValue;
  expiresAt: string;
  state: ApprovalState;
  decidedBy: string | null;
}

/** A steering instruction and what became of it (data-steer). */
export interface SteerData {
  commandId: string;
  text: string;
  state: 'DELIVERED' | 'REJECTED';
}

/**
 * A new run attempt of the turn (data-attempt), first in its step: the
 * text before it is the interrupted attempt's, kept as it was shown, and
 * the answer starts again after it.
 */
export interface AttemptData {
  attempt: number;
  /** The attempt it replaces. */
  interrupted: number;
}

/** A file the answer references (data-artifact); download it with the identity header. */
export interface ArtifactData {
  artifactId: string;
  name: string;
  mediaType: string;
  size: number;
  sha256: string;
  downloadUrl: string;
}

/** The data parts this transport writes. */
export type TurngateDataParts = {
  approval: ApprovalData;
  steer: SteerData;
  attempt: AttemptData;
  artifact: ArtifactData;
};

/** The UI message this transport speaks: turn metadata, its data parts, its tools as dynamic tools. */
export type TurngateUIMessage = UIMessage<TurnMetadata, TurngateDataParts>;

/** What the stream of a turn needs to know of it. */
export interface TurnRef {
  id: string;
  conversationId: string;
  position: number;
  state?: TurnState;
  attempt?: number;
  author?: { displayName: string };
}

export interface TurngateChatTransportOptions {
  client: TurngateClient;
  /**
   * Whether an aborted request (useChat's stop()) cancels the turn it
   * streams (default true). useChat's own cleanup calls stop() when a
   * component that made its Chat unmounts; to leave turns running when a
   * view goes away, make the Chat yourself and pass useChat({ chat }), or
   * set this false and cancel with client.cancel.
   */
  cancelOnAbort?: boolean;
  /** Told of failures that have nowhere else to go (a cancel that did not reach the server). */
  onError?: (err: unknown) => void;
}

/** The per-request body the transport reads (useChat: sendMessage(msg, { body })). */
export interface TurngateRequestBody {
  specialist?: string;
  documentIds?: string[];
  artifactIds?: string[];
}

/** The assistant message id of a turn. */
export const answerMessageId = (turnId: string) => `answer:${turnId}`;
/** The user message id of a turn, in loaded history. */
export const inputMessageId = (turnId: string) => `input:${turnId}`;

const finished = (s: TurnState | undefined) => s === 'COMPLETED' || s === 'FAILED' || s === 'CANCELLED';

const encoder = new TextEncoder();
const byteLength = (s: string) => encoder.encode(s).length;

/** s without its first n UTF-8 bytes (offsets count bytes: the server is Go). */
function dropBytes(s: string, n: number): string {
  const b = encoder.encode(s);
  return n >= b.length ? '' : new TextDecoder().decode(b.subarray(n));
}

const isURL = (s: string) => /^https?:\/\/\S+$/i.test(s);

/**
 * Maps the journal entries of one turn, in position order, to UI message
 * chunks: each run attempt is a step; answer deltas are text parts (a
 * tool call ends one); tool activity is a dynamic, provider-executed
 * tool; the final answer's citations are source parts; approvals, steers,
 * a new attempt and artifacts are data parts (by id, so an update
 * replaces); the terminal is finish, error (FAILED) or abort (CANCELLED).
 * When the published answer is not the text streamed (a withheld answer,
 * a redrawn draft), the step is reset and redrawn with it, so the message
 * ends as the server's answer. Entries of other turns, and entries at or
 * below the last position applied, change nothing.
 */
export class TurnChunks {
  readonly turnId: string;
  private meta: TurnMetadata;
  private last: number;
  private attempt = 0;
  private stepOpen = false;
  private textId: string | null = null;
  private parts = 0;
  /** The current attempt's streamed text, and where it ends in bytes. */
  private streamed = '';
  private end = 0;
  /** The current step's chunks other than text, to redraw it. */
  private stepChunks: UIMessageChunk[] = [];
  private tools = new Set<string>();
  private approvals = new Map<string, ApprovalData>();
  private started = false;
  private _done = false;

  constructor(turn: TurnRef) {
    this.turnId = turn.id;
    this.last = turn.position - 1;
    this.meta = {
      turnId: turn.id,
      roomId: turn.conversationId,
      position: turn.position,
      authorName: turn.author?.displayName ?? '',
      state: turn.state ?? 'QUEUED',
      attempt: turn.attempt ?? 0,
      reason: null,
    };
  }

  /** Whether the turn's terminal has been applied. */
  get done(): boolean {
    return this._done;
  }

  /** The metadata as applied so far. */
  get metadata(): TurnMetadata {
    return { ...this.meta };
  }

  /** The message's start: its id and metadata. */
  begin(): UIMessageChunk[] {
    if (this.started) return [];
    this.started = true;
    return [{ type: 'start', messageId: answerMessageId(this.turnId), messageMetadata: this.metadata }];
  }

  /** The chunks entry e adds (none when it is another turn's, a repeat, or the turn is done). */
  push(e: Entry): UIMessageChunk[] {
    if (e.seq <= this.last) return [];
    this.last = e.seq;
    if (e.turnId !== this.turnId || this._done) return [];
    const out = this.begin();
    switch (e.kind) {
      case 'TURN_ACCEPTED':
        if (e.accepted) this.meta.authorName = e.accepted.authorName;
        break;
      case 'TURN_STARTED':
        this.startAttempt(e.started?.attempt ?? e.attempt, out);
        this.meta.state = 'RUNNING';
        out.push({ type: 'message-metadata', messageMetadata: this.metadata });
        break;
      case 'ANSWER_DELTA': {
        const d = e.delta;
        if (!d || d.attempt < this.attempt) break; // a superseded attempt's text
        if (d.attempt > this.attempt || !this.stepOpen) this.startAttempt(d.attempt, out);
        // offset says where the text goes: a repeat overlaps, never duplicates.
        const text = d.offset < this.end ? dropBytes(d.text, this.end - d.offset) : d.text;
        if (!text) break;
        if (!this.textId) {
          this.textId = `${this.turnId}:${this.attempt}:${this.parts++}`;
          out.push({ type: 'text-start', id: this.textId });
        }
        out.push({ type: 'text-delta', id: this.textId, delta: text });
        this.streamed += text;
        this.end = Math.max(this.end, d.offset) + byteLength(text);
        break;
      }
      case 'TOOL_REQUESTED':
        if (e.tool) {
          this.ensureStep(e.attempt, out);
          this.closeText(out);
          this.tools.add(e.tool.callId);
          this.emit(out, { type: 'tool-input-available', toolCallId: e.tool.callId, toolName: e.tool.name, input: e.tool.arguments ?? {}, dynamic: true, providerExecuted: true });
        }
        break;
      case 'TOOL_COMPLETED':
        if (e.tool) {
          const t = e.tool;
          this.ensureStep(e.attempt, out);
          this.closeText(out);
          if (!this.tools.has(t.callId)) {
            // Its request is before the stream's start (or was refused unseen).
            this.tools.add(t.callId);
            this.emit(out, { type: 'tool-input-available', toolCallId: t.callId, toolName: t.name, input: {}, dynamic: true, providerExecuted: true });
          }
          if (t.status === 'ok') {
            this.emit(out, { type: 'tool-output-available', toolCallId: t.callId, output: { status: t.status, bytes: t.bytes, citations: t.citations }, dynamic: true, providerExecuted: true });
          } else {
            this.emit(out, { type: 'tool-output-error', toolCallId: t.callId, errorText: t.status ?? 'failed', dynamic: true, providerExecuted: true });
          }
        }
        break;
      case 'APPROVAL_REQUESTED':
        if (e.approvalRequest) {
          const a: ApprovalData = { ...e.approvalRequest, state: 'PENDING', decidedBy: null };
          this.approvals.set(a.approvalId, a);
          this.ensureStep(e.attempt, out);
          this.emit(out, { type: 'data-approval', id: a.approvalId, data: a });
        }
        break;
      case 'APPROVAL_DECIDED':
        if (e.approvalDecision) {
          const d = e.approvalDecision;
          const was = this.approvals.get(d.approvalId);
          if (!was) break; // requested before the stream's start
          const a: ApprovalData = { ...was, state: d.state, decidedBy: d.decidedBy };
          this.approvals.set(a.approvalId, a);
          this.emit(out, { type: 'data-approval', id: a.approvalId, data: a });
        }
        break;
      case 'STEER_DELIVERED':
      case 'STEER_REJECTED':
        if (e.steer) {
          const s = e.steer;
          this.ensureStep(e.attempt, out);
          this.emit(out, { type: 'data-steer', id: s.commandId, data: { commandId: s.commandId, text: s.text, state: s.state as SteerData['state'] } });
        }
        break;
      case 'TURN_ANSWER':
        if (e.answer) this.answer(e.answer, out);
        break;
      case 'TURN_TERMINAL':
        if (e.terminal) {
          this.closeText(out);
          if (this.stepOpen) out.push({ type: 'finish-step' });
          this.stepOpen = false;
          this.meta.state = e.terminal.outcome;
          this.meta.reason = e.terminal.reason;
          this._done = true;
          out.push({ type: 'message-metadata', messageMetadata: this.metadata });
          if (e.terminal.outcome === 'FAILED') out.push({ type: 'error', errorText: `The turn failed: ${e.terminal.reason}` });
          else if (e.terminal.outcome === 'CANCELLED') out.push({ type: 'abort', reason: e.terminal.reason });
          else out.push({ type: 'finish', finishReason: 'stop', messageMetadata: this.metadata });
        }
        break;
    }
    return out;
  }

  private emit(out: UIMessageChunk[], c: UIMessageChunk): void {
    this.stepChunks.push(c);
    out.push(c);
  }

  private closeText(out: UIMessageChunk[]): void {
    if (!this.textId) return;
    out.push({ type: 'text-end', id: this.textId });
    this.textId = null;
  }

  private ensureStep(attempt: number, out: UIMessageChunk[]): void {
    if (!this.stepOpen || attempt > this.attempt) this.startAttempt(Math.max(attempt, this.attempt), out);
  }

  /** Opens attempt n's step; a later attempt first closes the interrupted one's. */
  private startAttempt(n: number, out: UIMessageChunk[]): void {
    if (this.stepOpen && n === this.attempt) return;
    const interrupted = this.stepOpen || this.attempt > 0 ? this.attempt : 0;
    this.closeText(out);
    if (this.stepOpen) out.push({ type: 'finish-step' });
    out.push({ type: 'start-step' });
    this.stepOpen = true;
    this.attempt = Math.max(n, this.attempt);
    this.meta.attempt = this.attempt;
    this.streamed = '';
    this.end = 0;
    this.stepChunks = [];
    if (interrupted > 0 && this.attempt > interrupted) {
      this.emit(out, { type: 'data-attempt', id: `${this.turnId}:${this.attempt}`, data: { attempt: this.attempt, interrupted } });
    }
  }

  private answer(a: NonNullable<Entry['answer']>, out: UIMessageChunk[]): void {
    if (!this.stepOpen) this.startAttempt(this.attempt, out);
    if (a.text !== this.streamed) {
      // What was streamed is not what was published: redraw the step
      // with its tools and data parts, then the answer.
      this.textId = null;
      out.push({ type: 'reset-step' });
      out.push(...this.stepChunks);
      if (a.text) {
        const id = `${this.turnId}:${this.attempt}:${this.parts++}`;
        out.push({ type: 'text-start', id }, { type: 'text-delta', id, delta: a.text }, { type: 'text-end', id });
      }
      this.streamed = a.text;
    } else {
      this.closeText(out);
    }
    for (const c of a.citations) {
      const providerMetadata = { turngate: { citationId: c.id, ref: c.ref, documentId: c.documentId, passage: c.passage, digest: c.digest } };
      out.push(
        isURL(c.source)
          ? { type: 'source-url', sourceId: c.ref, url: c.source, title: c.source, providerMetadata }
          : { type: 'source-document', sourceId: c.ref, mediaType: 'text/plain', title: c.source, providerMetadata },
      );
    }
    for (const f of a.artifacts) {
      out.push({
        type: 'data-artifact',
        id: f.artifactId,
        data: { artifactId: f.artifactId, name: f.name, mediaType: f.mediaType, size: f.size, sha256: f.sha256, downloadUrl: f.downloadUrl },
      });
    }
  }
}

/**
 * Folds chunks into a UI message, as useChat does with a stream (for the
 * chunks TurnChunks writes): loaded history reads as the live stream did.
 */
export function messageFromChunks<M extends UIMessage = TurngateUIMessage>(chunks: Iterable<UIMessageChunk>): M {
  const msg = { id: '', role: 'assistant', metadata: undefined as unknown, parts: [] as Record<string, unknown>[] };
  const text = new Map<string, Record<string, unknown>>();
  const tool = (id: string) => msg.parts.findLast((p) => p.type === 'dynamic-tool' && p.toolCallId === id);
  const meta = (m: unknown) => {
    if (m != null) msg.metadata = { ...(msg.metadata as object), ...(m as object) };
  };
  for (const c of chunks) {
    switch (c.type) {
      case 'start':
        if (c.messageId) msg.id = c.messageId;
        meta(c.messageMetadata);
        break;
      case 'message-metadata':
      case 'finish':
        meta(c.messageMetadata);
        break;
      case 'start-step':
        msg.parts.push({ type: 'step-start' });
        break;
      case 'reset-step': {
        const i = msg.parts.findLastIndex((p) => p.type === 'step-start');
        msg.parts.splice(i + 1);
        text.clear();
        break;
      }
      case 'text-start': {
        const p = { type: 'text', text: '', state: 'streaming' };
        text.set(c.id, p);
        msg.parts.push(p);
        break;
      }
      case 'text-delta': {
        const p = text.get(c.id);
        if (p) p.text += c.delta;
        break;
      }
      case 'text-end': {
        const p = text.get(c.id);
        if (p) p.state = 'done';
        text.delete(c.id);
        break;
      }
      case 'tool-input-available':
        msg.parts.push({ type: 'dynamic-tool', toolName: c.toolName, toolCallId: c.toolCallId, state: 'input-available', input: c.input, providerExecuted: c.providerExecuted });
        break;
      case 'tool-output-available': {
        const p = tool(c.toolCallId);
        if (p) Object.assign(p, { state: 'output-available', output: c.output });
        break;
      }
      case 'tool-output-error': {
        const p = tool(c.toolCallId);
        if (p) Object.assign(p, { state: 'output-error', errorText: c.errorText });
        break;
      }
      case 'source-url':
      case 'source-document': {
        const { type, ...rest } = c;
        msg.parts.push({ type, ...rest });
        break;
      }
      default:
        if (c.type.startsWith('data-')) {
          const d = c as { type: string; id?: string; data: unknown };
          const was = d.id != null ? msg.parts.find((p) => p.type === d.type && p.id === d.id) : undefined;
          if (was) was.data = d.data;
          else msg.parts.push({ type: d.type, id: d.id, data: d.data });
        }
    }
  }
  return msg as unknown as M;
}

/** The room's running turn (the one in its lane now). */
const ActiveTurnDocument = new TypedDocumentString<
  { conversation: { activeTurn: { id: string; conversationId: string; position: number; state: TurnState; attempt: number; author: { displayName: string } } | null } | null },
  { id: string }
>(`query AiSdkActiveTurn($id: ID!) {
  conversation(id: $id) {
    activeTurn { id conversationId position state attempt author { displayName } }
  }
}`);

/** The idempotency key's alphabet and length (schema: SubmitMessageInput.idempotencyKey). */
const keyShape = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The idempotency key of a send: the user message's id, so a retried
 * send is one turn; a regeneration adds the answer it replaces, so it is
 * a new turn (and its retry is not). Ids outside the key's alphabet are
 * hashed.
 */
export async function idempotencyKey(userMessageId: string, regenerates?: string): Promise<string> {
  const raw = regenerates === undefined ? `ai-sdk:${userMessageId}` : `ai-sdk:${userMessageId}:re:${regenerates}`;
  if (keyShape.test(raw)) return raw;
  const digest = new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', encoder.encode(raw)));
  return `ai-sdk:h:${Array.from(digest.subarray(0, 20), (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** The text of a user message: its text parts, joined. */
function textOf(m: UIMessage): string {
  return m.parts
    .filter((p): p is Extract<UIMessage['parts'][number], { type: 'text' }> => p.type === 'text')
    .map((p) => p.text)
    .join('\n');
}

/**
 * useChat's transport for a turngate room (the chat's id is the room's).
 * See the module comment.
 */
export class TurngateChatTransport<M extends UIMessage = TurngateUIMessage> implements ChatTransport<M> {
  /** Reconnecting replays the turn from its acceptance: the message is rebuilt whole. */
  readonly resumeStreamIsReplay = true;
  private readonly client: TurngateClient;
  private readonly cancelOnAbort: boolean;
  private readonly onError: (err: unknown) => void;
  private readonly open = new Set<RoomStream>();
  /** Counts requests per chat: an abort followed at once by another request of the chat is a hand-over, not a stop. */
  private readonly requests = new Map<string, number>();

  constructor(opts: TurngateChatTransportOptions) {
    this.client = opts.client;
    this.cancelOnAbort = opts.cancelOnAbort ?? true;
    this.onError = opts.onError ?? ((err) => console.error('turngate:', err));
  }

  sendMessages = async (options: {
    trigger: 'submit-message' | 'regenerate-message';
    chatId: string;
    messageId: string | undefined;
    messages: M[];
    abortSignal: AbortSignal | undefined;
  } & ChatRequestOptions): Promise<ReadableStream<UIMessageChunk>> => {
    const n = this.request(options.chatId);
    const last = options.messages.at(-1);
    if (!last || last.role !== 'user') throw new Error('turngate: the last message to send is not a user message');
    const text = textOf(last);
    if (!text.trim()) throw new Error('turngate: the message has no text');
    const body = (options.body ?? {}) as TurngateRequestBody;
    const key = await idempotencyKey(last.id, options.trigger === 'regenerate-message' ? (options.messageId ?? '') : undefined);
    // Not aborted by the signal: once sent, the turn is known, and a stop
    // while it was being accepted cancels it (below) rather than leaving
    // a turn nobody follows.
    const turn = await this.client.submit(options.chatId, text, {
      idempotencyKey: key,
      specialist: body.specialist,
      documentIds: body.documentIds,
      artifactIds: body.artifactIds,
    });
    return this.follow(turn, options.chatId, n, options.abortSignal);
  };

  reconnectToStream = async (options: { chatId: string; abortSignal?: AbortSignal } & ChatRequestOptions): Promise<ReadableStream<UIMessageChunk> | null> => {
    const n = this.request(options.chatId);
    const data = await this.client.query(ActiveTurnDocument, { id: options.chatId }, options.abortSignal);
    const turn = data.conversation?.activeTurn;
    if (!turn || finished(turn.state)) return null;
    return this.follow(turn, options.chatId, n, options.abortSignal);
  };

  /**
   * The room's turns as UI messages, for useChat's initial messages: each
   * turn's message and, once it has ended, its answer as the stream drew
   * it. A turn still running has no answer here: resume streams it.
   */
  async loadMessages(chatId: string, signal?: AbortSignal): Promise<M[]> {
    const byTurn = new Map<string, { input: string; author: string; chunks: TurnChunks; out: UIMessageChunk[] }>();
    let after = 0;
    for (;;) {
      const page = await this.client.query(JournalDocument, { conversationId: chatId, after, first: 500 }, signal);
      for (const e of page.journal.entries) {
        after = e.seq;
        if (!e.turnId) continue;
        let t = byTurn.get(e.turnId);
        if (!t) {
          if (e.kind !== 'TURN_ACCEPTED') continue;
          t = { input: e.text ?? '', author: e.accepted?.authorName ?? '', chunks: new TurnChunks({ id: e.turnId, conversationId: e.conversationId, position: e.seq }), out: [] };
          byTurn.set(e.turnId, t);
        }
        t.out.push(...t.chunks.push(e));
      }
      if (!page.journal.hasMore) break;
    }
    const out: M[] = [];
    for (const [turnId, t] of byTurn) {
      const meta = t.chunks.metadata;
      out.push({ id: inputMessageId(turnId), role: 'user', metadata: meta, parts: [{ type: 'text', text: t.input }] } as unknown as M);
      if (t.chunks.done) out.push(messageFromChunks<M>(t.out));
    }
    return out;
  }

  /** Stops every stream this transport has open. */
  close = (): void => {
    for (const s of this.open) s.stop();
    this.open.clear();
  };

  private request(chatId: string): number {
    const n = (this.requests.get(chatId) ?? 0) + 1;
    this.requests.set(chatId, n);
    return n;
  }

  /** The turn's chunks from its acceptance until its terminal, from the room's resumable stream. */
  private follow(turn: TurnRef, chatId: string, n: number, signal: AbortSignal | undefined): ReadableStream<UIMessageChunk> {
    const chunks = new TurnChunks(turn);
    let stream: RoomStream | undefined;
    let off: (() => void) | undefined;
    const end = () => {
      off?.();
      if (stream) {
        stream.stop();
        this.open.delete(stream);
      }
    };
    const onAbort = () => {
      end();
      if (!this.cancelOnAbort || chunks.done) return;
      // useChat aborts a request it hands over to a newer one of the same
      // chat (a resume that replaces a resume, React's StrictMode
      // remount) right before making that one: wait a tick, and cancel
      // only when none came.
      setTimeout(() => {
        if (this.requests.get(chatId) !== n) return;
        this.client.cancel(turn.id).catch(this.onError);
      }, 0);
    };
    if (signal?.aborted) {
      onAbort();
      return new ReadableStream({ start: (c) => c.close() });
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    return new ReadableStream<UIMessageChunk>({
      start: (controller) => {
        for (const c of chunks.begin()) controller.enqueue(c);
        stream = this.client.room(turn.conversationId, { after: turn.position - 1, maxEntries: 256 });
        this.open.add(stream);
        const s = stream;
        let seen = turn.position - 1;
        const pump = () => {
          const snap = s.getSnapshot();
          const fresh = snap.entries.filter((e) => e.seq > seen);
          if (fresh.length > 0 && fresh[0].seq !== seen + 1) {
            // Positions are dense: a gap means entries went unseen.
            end();
            controller.error(new Error(`turngate: the room stream skipped from ${seen} to ${fresh[0].seq}`));
            return;
          }
          for (const e of fresh) {
            seen = e.seq;
            for (const c of chunks.push(e)) controller.enqueue(c);
            if (chunks.done) {
              signal?.removeEventListener('abort', onAbort);
              end();
              controller.close();
              return;
            }
          }
          if (snap.state === 'closed' || snap.state === 'offline') {
            signal?.removeEventListener('abort', onAbort);
            end();
            controller.error(snap.error ?? new Error('turngate: the room stream closed'));
          }
        };
        off = s.subscribe(pump);
        pump();
      },
      cancel: () => {
        signal?.removeEventListener('abort', onAbort);
        end();
      },
    });
  }
}
