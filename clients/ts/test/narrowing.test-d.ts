// Type-level tests of the generated types: `npm run typecheck` (tsc over
// src and test) checks this file; nothing here runs. Each proof fails the
// type check when the types stop narrowing: a case that reads its own
// member's fields compiles only if the switch narrowed the body to that
// member; a `@ts-expect-error` line is an error itself when the wrong
// member's field it reads would compile; a switch that forgets a member
// cannot reach `never`.
import type {
  ApprovalState,
  CommandState,
  Entry,
  EntryBody,
  TerminalReason,
  TurngateClient,
  TurnState,
} from '../src/index.js';

/** true only when A and B are the same type. */
type Exactly<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

function unreachable(body: never): never {
  throw new Error(`a journal body of an unknown type: ${JSON.stringify(body)}`);
}

/**
 * describe reads each member's own fields, with no cast and no optional
 * chaining: every case compiles only because `body.__typename` narrowed
 * `body` to its member, and the default compiles only because every
 * member has its case.
 */
export function describe(e: Entry): string {
  const body = e.body;
  switch (body.__typename) {
    case 'TurnAccepted':
      return `${body.authorName} (${body.authorId}) sent a message`;
    case 'TurnStart':
      return `run ${body.attempt} of agent version ${body.agentVersion}${body.recovered ? ', recovered' : ''}`;
    case 'AnswerDelta':
      return `attempt ${body.attempt} at ${body.offset}: ${body.text}`;
    case 'ToolRequested':
      return `${body.name}(${JSON.stringify(body.arguments)}) as ${body.callId}`;
    case 'ToolCompleted':
      return `${body.name}: ${body.status}, ${body.bytes} bytes, ${body.citationRefs.join(' ')}`;
    case 'ApprovalRequest':
      return `${body.tool} waits for a decision until ${body.expiresAt}`;
    case 'ApprovalDecisionRecord': {
      const state: ApprovalState = body.state;
      return `${body.approvalId}: ${state} by ${body.decidedBy ?? 'nobody'}`;
    }
    case 'SteerDelivered':
      return `steered by ${body.actorId}: ${body.text}`;
    case 'SteerRejected': {
      const reason: TerminalReason = body.terminal.reason;
      return `not delivered (${reason}): ${body.text}`;
    }
    case 'CheckpointRecord':
      return `${body.steps} steps, ${body.toolCalls} tool calls, ${body.messages} messages`;
    case 'CompactionRecord':
      return `${body.summarised} messages summarised, ${body.tokensBefore} → ${body.tokensAfter} tokens${body.reused ? ' (reused)' : ''}`;
    case 'TurnAnswer':
      return `${body.text} [${body.citations.map((c) => c.ref).join(', ')}] ${body.artifacts.map((a) => a.name).join(', ')}`;
    case 'TurnTerminal': {
      const outcome: TurnState = body.outcome;
      return `${outcome}: ${body.reason}`;
    }
    case 'MemberJoined':
      return `${body.memberId} joined (audience ${body.audienceVersion})`;
    case 'MemberLeft':
      return `${body.memberId} left (audience ${body.audienceVersion})`;
    default:
      return unreachable(body);
  }
}

/** Reading another member's field in a case does not compile. */
export function wrongMember(body: EntryBody): unknown {
  switch (body.__typename) {
    case 'AnswerDelta':
      // @ts-expect-error: citations are TurnAnswer's, not an answer delta's.
      return body.citations;
    case 'ToolRequested':
      // @ts-expect-error: status is ToolCompleted's, not ToolRequested's.
      return body.status;
    case 'SteerDelivered':
      // @ts-expect-error: terminal is SteerRejected's, not SteerDelivered's.
      return body.terminal;
    case 'MemberJoined':
      // @ts-expect-error: authorName is TurnAccepted's.
      return body.authorName;
    default:
      // @ts-expect-error: before narrowing, no member's own field is there.
      return body.text;
  }
}

/** A switch that forgets a member cannot reach never. */
export function forgetsAMember(body: EntryBody): string {
  switch (body.__typename) {
    case 'TurnAccepted':
      return body.authorName;
    default:
      // @ts-expect-error: fourteen other members reach the default.
      return unreachable(body);
  }
}

// The body has exactly one member per journal kind, and the entry's body
// is the exported EntryBody.
const memberNames: Exactly<
  EntryBody['__typename'],
  | 'TurnAccepted'
  | 'TurnStart'
  | 'AnswerDelta'
  | 'ToolRequested'
  | 'ToolCompleted'
  | 'ApprovalRequest'
  | 'ApprovalDecisionRecord'
  | 'SteerDelivered'
  | 'SteerRejected'
  | 'CheckpointRecord'
  | 'CompactionRecord'
  | 'TurnAnswer'
  | 'TurnTerminal'
  | 'MemberJoined'
  | 'MemberLeft'
> = true;
const entryBody: Exactly<Entry['body'], EntryBody> = true;

// steer and decideApproval answer enums, not strings.
type SteerState = Awaited<ReturnType<TurngateClient['steer']>>['result']['state'];
type DecidedState = Awaited<ReturnType<TurngateClient['decideApproval']>>['state'];
const steerState: Exactly<SteerState, CommandState> = true;
const decidedState: Exactly<DecidedState, ApprovalState> = true;
// @ts-expect-error: a string is not a CommandState.
const notAState: SteerState = 'delivered';

export const proofs = [memberNames, entryBody, steerState, decidedState, notAState];
