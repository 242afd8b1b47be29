import type { DocumentTypeDecoration } from '@graphql-typed-document-node/core';
import { createClient as createSSEClient } from 'graphql-sse';
import { createClient as createWSClient, type Client as WSClient } from 'graphql-ws';

import { fromGraphQLErrors, fromHTTPStatus, toTurngateError, TurngateError, type GraphQLErrorLike } from './errors.js';

/** An operation: its text, typed with its result R and variables V (graphql-codegen's TypedDocumentString). */
export type Operation<R, V> = DocumentTypeDecoration<R, V> & { toString(): string };

/** Returns the current identity envelope; asked again after UNAUTHENTICATED. */
export type IdentityProvider = () => string | Promise<string>;

/** How subscriptions travel. */
export type StreamTransport = 'sse' | 'ws';

export interface TransportOptions {
  /** The GraphQL endpoint, e.g. https://chat.example.com/graphql or /graphql in a page. */
  url: string;
  identity: IdentityProvider;
  /** The identity header (default X-Turngate-Identity). */
  header?: string;
  /**
   * "sse" (the default, and the only choice in browsers: a browser cannot
   * set a header on a WebSocket upgrade, and identity never travels in a
   * body) or "ws" (graphql-transport-ws with the header on the upgrade, for
   * programs: pass webSocketImpl, e.g. the ws package's WebSocket).
   */
  transport?: StreamTransport;
  /** A WebSocket class whose constructor takes (url, protocols, { headers }), like the ws package's. */
  webSocketImpl?: unknown;
  /** fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
  /** A stream that carries no byte for this long is dropped and resumed (default 45 s; the server pings every 15 s). */
  idleTimeoutMs?: number;
}

/** What a subscription reports. open fires once the server accepted the stream. */
export interface StreamSink<T> {
  open?(): void;
  next(value: T): void;
  error(err: TurngateError): void;
  complete(): void;
}

interface Body {
  data?: unknown;
  errors?: GraphQLErrorLike[];
}

/**
 * The wire: queries and mutations as POSTs, subscriptions over SSE or
 * graphql-transport-ws, every request carrying the identity envelope in
 * its header. Nothing here retries: the client decides what may.
 */
export class Transport {
  private readonly opts: Required<Pick<TransportOptions, 'url' | 'identity' | 'header' | 'transport' | 'idleTimeoutMs'>> & TransportOptions;
  private ws?: WSClient;
  private wsToken = '';
  private token?: string;

  constructor(opts: TransportOptions) {
    this.opts = { header: 'X-Turngate-Identity', transport: 'sse', idleTimeoutMs: 45_000, ...opts };
    if (this.opts.transport === 'ws' && !this.opts.webSocketImpl) {
      throw new Error('transport "ws" needs webSocketImpl (e.g. the ws package\'s WebSocket)');
    }
  }

  private get fetch(): typeof fetch {
    return this.opts.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** The envelope last sent, if any. */
  get lastIdentity(): string | undefined {
    return this.token;
  }

  /** The envelope to send: asked once, and again (fresh) after UNAUTHENTICATED. */
  async identity(fresh = false): Promise<string> {
    if (fresh || this.token === undefined) this.token = await this.opts.identity();
    return this.token;
  }

  /**
   * Runs op with the current envelope; on UNAUTHENTICATED asks identity
   * again and, when it returns another envelope, runs op once more with
   * it. The same envelope fails closed at once.
   */
  private async withIdentity<T>(op: (token: string) => Promise<T>): Promise<T> {
    const token = await this.identity();
    try {
      return await op(token);
    } catch (err) {
      if (!(err instanceof TurngateError) || err.code !== 'UNAUTHENTICATED') throw err;
      const again = await this.identity(true);
      if (again === token) throw err;
      return op(again);
    }
  }

  /** One query or mutation: its data, or a TurngateError. */
  request<R, V extends Record<string, unknown>>(doc: Operation<R, V>, variables: V, signal?: AbortSignal): Promise<R> {
    const body = JSON.stringify({ query: doc.toString(), variables });
    return this.withIdentity(async (token) => {
      let res: Response;
      try {
        res = await this.fetch(this.opts.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/graphql-response+json, application/json',
            [this.opts.header]: token,
          },
          body,
          signal,
        });
      } catch (err) {
        if (signal?.aborted) throw err;
        throw toTurngateError(err);
      }
      let parsed: Body | undefined;
      try {
        parsed = (await res.json()) as Body;
      } catch {
        parsed = undefined;
      }
      if (parsed?.errors?.length) throw fromGraphQLErrors(parsed.errors);
      if (!res.ok || !parsed || parsed.data == null) throw fromHTTPStatus(res.status, res.statusText);
      return parsed.data as R;
    });
  }

  /** Starts a subscription; the returned function ends it. */
  subscribe<R, V extends Record<string, unknown>>(doc: Operation<R, V>, variables: V, sink: StreamSink<R>): () => void {
    return this.opts.transport === 'ws' ? this.subscribeWS(doc, variables, sink) : this.subscribeSSE(doc, variables, sink);
  }

  private subscribeSSE<R, V extends Record<string, unknown>>(doc: Operation<R, V>, variables: V, sink: StreamSink<R>): () => void {
    let done = false;
    let idle: ReturnType<typeof setTimeout> | undefined;
    const watchdog = new AbortController();
    const finish = (report: () => void) => {
      if (done) return;
      done = true;
      clearTimeout(idle);
      report();
      dispose();
    };
    const touch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => {
        watchdog.abort();
        finish(() => sink.error(new TurngateError('NETWORK', `stream idle for ${this.opts.idleTimeoutMs} ms`)));
      }, this.opts.idleTimeoutMs);
    };
    // fetch as graphql-sse sees it: the response counts as the stream's
    // opening, every chunk of its body as a sign of life.
    const fetchFn: typeof fetch = async (input, init) => {
      const signal = init?.signal ? AbortSignal.any([init.signal, watchdog.signal]) : watchdog.signal;
      const res = await this.fetch(input, { ...init, signal });
      if (!res.ok || !res.body) return res;
      touch();
      sink.open?.();
      const body = res.body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, ctl) {
            touch();
            ctl.enqueue(chunk);
          },
        }),
      );
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    };
    const client = createSSEClient({
      url: this.opts.url,
      singleConnection: false,
      retryAttempts: 0,
      fetchFn,
      headers: async () => ({ [this.opts.header]: await this.identity() }),
    });
    const dispose = client.subscribe<R>({ query: doc.toString(), variables }, {
      next: (result) => {
        if (done) return;
        if (result.errors?.length) return finish(() => sink.error(fromGraphQLErrors(result.errors as unknown as GraphQLErrorLike[])));
        if (result.data != null) sink.next(result.data);
      },
      error: (err) => finish(() => sink.error(toTurngateError(err))),
      complete: () => finish(() => sink.complete()),
    });
    return () => {
      done = true;
      clearTimeout(idle);
      dispose();
      client.dispose();
    };
  }

  private wsClient(): WSClient {
    if (this.ws) return this.ws;
    const Base = this.opts.webSocketImpl as new (url: string, protocols: string | string[], opts: { headers: Record<string, string> }) => WebSocket;
    const self = this;
    const Impl = class extends Base {
      constructor(url: string, protocols: string | string[]) {
        super(url, protocols, { headers: { [self.opts.header]: self.wsToken } });
      }
    };
    const wsURL = new URL(this.opts.url, typeof location === 'undefined' ? undefined : location.href);
    wsURL.protocol = wsURL.protocol === 'https:' ? 'wss:' : 'ws:';
    this.ws = createWSClient({
      url: async () => {
        self.wsToken = await self.identity();
        return wsURL.toString();
      },
      webSocketImpl: Impl,
      lazy: true,
      retryAttempts: 0,
      shouldRetry: () => false,
      keepAlive: 15_000,
      on: {
        closed: () => {
          // The next subscribe dials a new socket.
          this.ws = undefined;
        },
      },
    });
    return this.ws;
  }

  private subscribeWS<R, V extends Record<string, unknown>>(doc: Operation<R, V>, variables: V, sink: StreamSink<R>): () => void {
    let done = false;
    const client = this.wsClient();
    const unhook = client.on('connected', () => sink.open?.());
    const finish = (report: () => void) => {
      if (done) return;
      done = true;
      unhook();
      report();
      dispose();
    };
    const dispose = client.subscribe<R>({ query: doc.toString(), variables }, {
      next: (result) => {
        if (done) return;
        if (result.errors?.length) return finish(() => sink.error(fromGraphQLErrors(result.errors as unknown as GraphQLErrorLike[])));
        if (result.data != null) sink.next(result.data);
      },
      error: (err) => finish(() => sink.error(wsError(err))),
      complete: () => finish(() => sink.complete()),
    });
    return () => {
      done = true;
      unhook();
      dispose();
    };
  }

  /** Ends the transport's shared WebSocket, if any. */
  close(): void {
    void this.ws?.dispose();
    this.ws = undefined;
  }
}

/** A graphql-ws error (GraphQL errors, a close event or an Error) as a TurngateError. */
function wsError(err: unknown): TurngateError {
  if (Array.isArray(err)) return fromGraphQLErrors(err as GraphQLErrorLike[]);
  if (err && typeof err === 'object' && 'code' in err && typeof (err as { code: unknown }).code === 'number') {
    const { code, reason } = err as { code: number; reason?: string };
    const message = `WebSocket closed ${code}${reason ? ': ' + reason : ''}`;
    switch (code) {
      case 4401:
        return new TurngateError('UNAUTHENTICATED', message);
      case 4403:
        return new TurngateError('FORBIDDEN', message);
      case 4400:
      case 4406:
      case 4409:
        return new TurngateError('BAD_USER_INPUT', message);
      case 4429:
        return new TurngateError('RATE_LIMITED', message);
      case 1012:
      case 1013:
        return new TurngateError('UNAVAILABLE', message);
      default:
        return new TurngateError('NETWORK', message);
    }
  }
  return toTurngateError(err);
}
