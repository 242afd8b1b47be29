/**
 * The error codes a turngate server answers with (extensions.code), plus
 * NETWORK for a request that got no GraphQL answer at all: the socket
 * dropped, the server was unreachable, or something in between answered
 * with an HTTP error.
 */
export type ErrorCode =
  | 'NETWORK'
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'BAD_USER_INPUT'
  | 'CONFLICT'
  | 'RATE_LIMITED'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNAVAILABLE'
  | 'INTERNAL'
  | 'GRAPHQL_PARSE_FAILED'
  | 'GRAPHQL_VALIDATION_FAILED';

/** A GraphQL error as the server presents it. */
export interface GraphQLErrorLike {
  message: string;
  path?: ReadonlyArray<string | number>;
  extensions?: { code?: string; retryable?: boolean; retryAfterMs?: number; field?: string; [k: string]: unknown };
}

/** What a failed request or stream ended with. */
export class TurngateError extends Error {
  readonly code: ErrorCode;
  /** Whether the browser rule lets a read or subscription retry it on its own. */
  readonly retryable: boolean;
  /** How long the server asked to wait before retrying, when it said. */
  readonly retryAfterMs?: number;
  /** The HTTP status, when an HTTP answer carried no GraphQL errors. */
  readonly status?: number;
  readonly errors: readonly GraphQLErrorLike[];

  constructor(code: ErrorCode, message: string, opts: { retryAfterMs?: number; status?: number; errors?: readonly GraphQLErrorLike[]; cause?: unknown } = {}) {
    super(message, { cause: opts.cause });
    this.name = 'TurngateError';
    this.code = code;
    this.retryable = isRetryable(code);
    this.retryAfterMs = opts.retryAfterMs;
    this.status = opts.status;
    this.errors = opts.errors ?? [];
  }
}

/**
 * The browser rule: only network failures, RATE_LIMITED and UNAVAILABLE
 * are retried, and only for reads and subscriptions (mutations only with
 * their idempotency key or command id). UNAUTHENTICATED, FORBIDDEN and
 * NOT_FOUND fail closed at once, like every other code.
 */
export function isRetryable(code: ErrorCode): boolean {
  return code === 'NETWORK' || code === 'RATE_LIMITED' || code === 'UNAVAILABLE';
}

const known = new Set<string>([
  'UNAUTHENTICATED', 'FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT', 'CONFLICT', 'RATE_LIMITED',
  'PAYLOAD_TOO_LARGE', 'UNAVAILABLE', 'INTERNAL', 'GRAPHQL_PARSE_FAILED', 'GRAPHQL_VALIDATION_FAILED',
]);

/** The error a GraphQL response's errors amount to: the first one's code. */
export function fromGraphQLErrors(errors: readonly GraphQLErrorLike[]): TurngateError {
  const first = errors[0] ?? { message: 'unknown error' };
  const raw = first.extensions?.code;
  const code: ErrorCode = raw && known.has(raw) ? (raw as ErrorCode) : 'INTERNAL';
  return new TurngateError(code, first.message, { retryAfterMs: first.extensions?.retryAfterMs, errors });
}

/**
 * The error an HTTP status without a GraphQL body amounts to. 401/403/404
 * fail closed; 429 is RATE_LIMITED; 502/503/504 (a proxy in front of a
 * replica that went away) and any other status are NETWORK, retried.
 */
export function fromHTTPStatus(status: number, statusText = ''): TurngateError {
  const message = `HTTP ${status}${statusText ? ' ' + statusText : ''}`;
  switch (status) {
    case 401:
      return new TurngateError('UNAUTHENTICATED', message, { status });
    case 403:
      return new TurngateError('FORBIDDEN', message, { status });
    case 404:
      return new TurngateError('NOT_FOUND', message, { status });
    case 413:
      return new TurngateError('PAYLOAD_TOO_LARGE', message, { status });
    case 429:
      return new TurngateError('RATE_LIMITED', message, { status });
    default:
      return new TurngateError('NETWORK', message, { status });
  }
}

/** Any thrown value as a TurngateError: what is not one already is a network failure. */
export function toTurngateError(err: unknown): TurngateError {
  if (err instanceof TurngateError) return err;
  if (err && typeof err === 'object' && 'response' in err) {
    const res = (err as { response?: { status: number; statusText: string } }).response;
    if (res) return fromHTTPStatus(res.status, res.statusText);
  }
  const message = err instanceof Error ? err.message : String(err);
  return new TurngateError('NETWORK', message, { cause: err });
}
