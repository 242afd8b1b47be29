import { toTurngateError, TurngateError } from './errors.js';
import {
  AddRoomMemberDocument,
  CancelTurnDocument,
  ConversationDocument,
  ConversationsDocument,
  CreateConversationDocument,
  RenameConversationDocument,
  DecideApprovalDocument,
  JournalDocument,
  MeDocument,
  SteerTurnDocument,
  SubmitMessageDocument,
  TurnDocument,
  TurnReplayDocument,
  type ApprovalDecision,
  type ApprovalState,
  type CommandState,
  type ConversationFieldsFragment,
  type ConversationKind,
  type MemberFieldsFragment,
  type TurnFieldsFragment,
  type TurnReplayQuery,
} from './generated/graphql.js';
import { defaultRetry, backoff, sleep, type RetryPolicy } from './retry.js';
import { RoomStream, type RoomStreamOptions } from './room.js';
import { Transport, type Operation, type TransportOptions } from './transport.js';

export interface ClientOptions extends TransportOptions {
  /** The retry window and backoff for reads, subscriptions and keyed mutations. */
  retry?: Partial<RetryPolicy>;
}

export interface SubmitOptions {
  /** The turn's idempotency key; made (a UUID) when omitted. A retry reuses it. */
  idempotencyKey?: string;
  /** Route the turn to a specialist of the caller's roster. */
  specialist?: string;
  /** Exactly the documents the turn may see. */
  documentIds?: string[];
  /** Artifacts selected as the turn's input. */
  artifactIds?: string[];
  signal?: AbortSignal;
}

export interface CommandOptions {
  /** The command id; made (a UUID) when omitted. A retry reuses it. */
  commandId?: string;
  signal?: AbortSignal;
}

/** A command's id and what the server answered. */
export interface CommandResult<T> {
  commandId: string;
  result: T;
}

/** A member just added to a shared room, as its owner is told of it. */
export interface AddedMember {
  /** The room with its members now. */
  room: ConversationFieldsFragment;
  /**
   * How many of the room's earlier turns the new member reads withheld:
   * turns that drew on a document they may not read, and answers withheld
   * from the whole room. Each keeps its place in the journal and reads as
   * the withheld notice (AUDIENCE_WITHHELD).
   */
  withheldTurns: number;
}

/** The client: every method speaks turngate's contract, typed from schema.graphql. */
export interface TurngateClient {
  readonly transport: Transport;
  readonly retryPolicy: RetryPolicy;
  /** A read, retried on its own under the browser rule. */
  query<R, V extends Record<string, unknown>>(doc: Operation<R, V>, variables: V, signal?: AbortSignal): Promise<R>;
  /** A mutation, sent once: it is never retried without a key. */
  mutate<R, V extends Record<string, unknown>>(doc: Operation<R, V>, variables: V, signal?: AbortSignal): Promise<R>;
  me(signal?: AbortSignal): Promise<MemberFieldsFragment>;
  /** The caller's rooms, most recently joined first (up to first, at most 100). */
  conversations(first?: number, signal?: AbortSignal): Promise<ConversationFieldsFragment[]>;
  conversation(id: string, signal?: AbortSignal): Promise<ConversationFieldsFragment | null>;
  createConversation(title: string, kind: ConversationKind, signal?: AbortSignal): Promise<ConversationFieldsFragment>;
  /** Renames a room (owner only; safe to re-send). */
  renameConversation(id: string, title: string, signal?: AbortSignal): Promise<ConversationFieldsFragment>;
  /** Adds a member to a shared room (owner only; safe to re-send) and says how much history they read withheld. */
  addRoomMember(roomId: string, email: string, signal?: AbortSignal): Promise<AddedMember>;
  /**
   * Durably submits a message: makes an idempotency key when none is
   * given and re-sends the same key on retryable failures (network,
   * RATE_LIMITED, UNAVAILABLE) within the retry window, so a retry never
   * makes a second turn.
   */
  submit(roomId: string, text: string, opts?: SubmitOptions): Promise<TurnFieldsFragment>;
  /** Steers a running turn; a retry reuses the command id. */
  steer(turnId: string, text: string, opts?: CommandOptions): Promise<CommandResult<{ state: CommandState }>>;
  /** Cancels a turn; a retry reuses the command id. */
  cancel(turnId: string, opts?: CommandOptions): Promise<CommandResult<TurnFieldsFragment>>;
  /** Decides an approval; a retry of the same decision converges on it. */
  decideApproval(approvalId: string, decision: ApprovalDecision, signal?: AbortSignal): Promise<{ id: string; state: ApprovalState; executed: boolean }>;
  /** A turn as the server has it now. */
  turn(id: string, signal?: AbortSignal): Promise<TurnFieldsFragment | null>;
  /** A turn's model calls in order (its replay for audit), as this member may read them. */
  replay(id: string, first?: number, signal?: AbortSignal): Promise<TurnReplayQuery['turn']>;
  /** A room's journal, resumable forever (see RoomStream). */
  room(roomId: string, opts?: RoomStreamOptions): RoomStream;
  /** Closes the transport's shared connections. */
  close(): void;
}

/** A random UUID (v4), for idempotency keys and command ids. */
export function newId(): string {
  return globalThis.crypto.randomUUID();
}

/**
 * Runs op, re-running it after retryable failures with backoff and
 * jitter until the window since the first failure runs out; the last
 * failure is then thrown. Anything not retryable is thrown at once.
 */
export async function retrying<T>(policy: RetryPolicy, op: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const start = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await op();
    } catch (raw) {
      if (signal?.aborted) throw raw;
      const err = toTurngateError(raw);
      const left = start + policy.windowMs - Date.now();
      if (!err.retryable || left <= 0) throw err;
      await sleep(Math.min(left, backoff(policy, attempt, err.retryAfterMs)), signal);
    }
  }
}

export function createClient(opts: ClientOptions): TurngateClient {
  const transport = new Transport(opts);
  const policy: RetryPolicy = { ...defaultRetry, ...opts.retry };
  const query = <R, V extends Record<string, unknown>>(doc: Operation<R, V>, variables: V, signal?: AbortSignal) =>
    retrying(policy, () => transport.request(doc, variables, signal), signal);
  // A mutation that carries its own key or id: safe to re-send.
  const keyed = query;
  const mutate = <R, V extends Record<string, unknown>>(doc: Operation<R, V>, variables: V, signal?: AbortSignal) =>
    transport.request(doc, variables, signal);

  return {
    transport,
    retryPolicy: policy,
    query,
    mutate,
    async me(signal) {
      return (await query(MeDocument, {}, signal)).me;
    },
    async conversations(first = 50, signal) {
      const data = await query(ConversationsDocument, { first }, signal);
      return data.conversations.edges.map((e) => e.node);
    },
    async conversation(id, signal) {
      return (await query(ConversationDocument, { id }, signal)).conversation;
    },
    async createConversation(title, kind, signal) {
      return (await mutate(CreateConversationDocument, { input: { title, kind } }, signal)).createConversation;
    },
    async renameConversation(id, title, signal) {
      // A rename converges on the title it names: safe to re-send.
      return (await keyed(RenameConversationDocument, { input: { conversationId: id, title } }, signal)).renameConversation;
    },
    async addRoomMember(roomId, email, signal) {
      // Adding a member who is already one converges: safe to re-send.
      const room = (await keyed(AddRoomMemberDocument, { input: { conversationId: roomId, email } }, signal)).addRoomMember;
      // The result lists every member; the server keeps emails trimmed and
      // lowercased (A-Z only).
      const want = email.trim().replace(/[A-Z]/g, (c) => c.toLowerCase());
      const added = room.members.find((m) => m.member.email === want);
      return { room, withheldTurns: added?.withheldTurns ?? 0 };
    },
    async submit(roomId, text, o = {}) {
      const input = {
        conversationId: roomId,
        text,
        idempotencyKey: o.idempotencyKey ?? newId(),
        specialist: o.specialist,
        documentIds: o.documentIds,
        artifactIds: o.artifactIds,
      };
      return (await keyed(SubmitMessageDocument, { input }, o.signal)).submitMessage;
    },
    async steer(turnId, text, o = {}) {
      const commandId = o.commandId ?? newId();
      const data = await keyed(SteerTurnDocument, { input: { commandId, turnId, text } }, o.signal);
      return { commandId, result: { state: data.steerTurn.state } };
    },
    async cancel(turnId, o = {}) {
      const commandId = o.commandId ?? newId();
      const data = await keyed(CancelTurnDocument, { input: { commandId, turnId } }, o.signal);
      return { commandId, result: data.cancelTurn };
    },
    async decideApproval(approvalId, decision, signal) {
      return (await keyed(DecideApprovalDocument, { input: { approvalId, decision } }, signal)).decideApproval;
    },
    async turn(id, signal) {
      return (await query(TurnDocument, { id }, signal)).turn;
    },
    async replay(id, first, signal) {
      return (await query(TurnReplayDocument, { id, first }, signal)).turn;
    },
    room(roomId, o) {
      return new RoomStream(transport, roomId, policy, o);
    },
    close() {
      transport.close();
    },
  };
}

export { JournalDocument, TurngateError };
