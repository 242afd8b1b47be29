/**
 * @turngate/client: the typed TypeScript client of turngate.
 *
 *   const client = createClient({ url: '/graphql', identity: () => envelope });
 *   const room = client.room(roomId);            // resumes forever, no gap, no repeat
 *   room.subscribe(() => render(room.getSnapshot()));
 *   await client.submit(roomId, 'When is the launch?'); // one turn, however often retried
 *
 * In browsers, subscriptions travel over SSE (graphql-sse) with the
 * identity envelope in the request header; programs may choose
 * graphql-transport-ws (transport: 'ws') with the header on the upgrade.
 */
export { createClient, newId, retrying } from './client.js';
export type { AddedMember, ClientOptions, CommandOptions, CommandResult, SubmitOptions, TurngateClient } from './client.js';
export { TurngateError, isRetryable } from './errors.js';
export type { ErrorCode, GraphQLErrorLike } from './errors.js';
export { RoomStream } from './room.js';
export type { ConnectionState, RoomSnapshot, RoomStreamOptions } from './room.js';
export { defaultRetry, backoff } from './retry.js';
export type { RetryPolicy } from './retry.js';
export { Transport } from './transport.js';
export type { IdentityProvider, Operation, StreamTransport, TransportOptions } from './transport.js';
export { TurnFolder } from './turns.js';
export type { ApprovalView, Entry, InterruptedAnswer, SteerView, ToolView, TurnView } from './turns.js';
export type { JsonValue } from './json.js';
export type {
  ApprovalState,
  CommandState,
  JournalKind,
  JournalPayloadFieldsFragment as EntryBody,
  TerminalReason,
  TurnState,
} from './generated/graphql.js';
export * as operations from './generated/graphql.js';
