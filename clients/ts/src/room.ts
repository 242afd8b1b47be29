import { RoomJournalDocument } from './generated/graphql.js';
import type { TurngateError } from './errors.js';
import { backoff, type RetryPolicy } from './retry.js';
import type { Transport } from './transport.js';
import { TurnFolder, type Entry, type TurnView } from './turns.js';

/**
 * Where a stream stands. live: subscribed and following. reconnecting: a
 * retryable failure, retrying with backoff inside the retry window.
 * offline: the window ran out; retry() starts again. closed: stopped, or
 * failed closed (error says why: UNAUTHENTICATED, FORBIDDEN, NOT_FOUND...).
 */
export type ConnectionState = 'connecting' | 'live' | 'reconnecting' | 'offline' | 'closed';

/** A room stream as it is now: what a view renders. */
export interface RoomSnapshot {
  roomId: string;
  entries: readonly Entry[];
  turns: readonly TurnView[];
  state: ConnectionState;
  /** Why the stream is offline or closed; null while it is fine. */
  error: TurngateError | null;
  /** The last position seen: where the stream resumes. */
  position: number;
}

export interface RoomStreamOptions {
  /** Start after this position (default 0: the whole journal). */
  after?: number;
  /** Keep at most this many entries in the snapshot (default 5,000; turns are kept whole). */
  maxEntries?: number;
}

/**
 * A room's journal from a position, for as long as it is wanted: it
 * resumes from the last position seen across dropped sockets, server
 * restarts and other replicas, never repeating or skipping an entry,
 * and folds entries into turn views. Retryable failures (network,
 * RATE_LIMITED, UNAVAILABLE) retry with backoff and jitter within the
 * retry window, then the stream is offline until retry(); any other
 * failure closes it at once.
 */
export class RoomStream {
  readonly roomId: string;
  private readonly transport: Transport;
  private readonly policy: RetryPolicy;
  private readonly maxEntries: number;
  private readonly folder: TurnFolder;
  private entries: Entry[] = [];
  private state: ConnectionState = 'connecting';
  private error: TurngateError | null = null;
  private listeners = new Set<() => void>();
  private snapshot: RoomSnapshot;
  private unsubscribe?: () => void;
  private timer?: ReturnType<typeof setTimeout>;
  private outageStart = 0;
  private attempt = 0;
  private stopped = false;
  private reauthenticated = false;

  constructor(transport: Transport, roomId: string, policy: RetryPolicy, opts: RoomStreamOptions = {}) {
    this.transport = transport;
    this.roomId = roomId;
    this.policy = policy;
    this.maxEntries = opts.maxEntries ?? 5_000;
    this.folder = new TurnFolder(opts.after ?? 0);
    this.snapshot = this.makeSnapshot();
    this.connect();
  }

  /** Calls listener after every change; returns the unsubscribe function (useSyncExternalStore's shape). */
  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  /** The current snapshot; the same object until something changes. */
  getSnapshot = (): RoomSnapshot => this.snapshot;

  /** Resolves with the first snapshot pred accepts (rejects when the stream closes first). */
  until(pred: (s: RoomSnapshot) => boolean, signal?: AbortSignal): Promise<RoomSnapshot> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const s = this.snapshot;
        if (pred(s)) {
          off();
          resolve(s);
        } else if (s.state === 'closed') {
          off();
          reject(s.error ?? new Error('room stream closed'));
        }
      };
      const off = this.subscribe(check);
      signal?.addEventListener('abort', () => {
        off();
        reject(signal.reason);
      });
      check();
    });
  }

  /** A turn's view, when the stream has seen it. */
  turn(id: string): TurnView | undefined {
    return this.folder.get(id);
  }

  /** Shows a steer as pending until its journal entry arrives. */
  notePendingSteer(turnId: string, commandId: string, text: string): void {
    this.folder.pendingSteer(turnId, commandId, text);
    this.emit();
  }

  /** Ends the stream for good. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.set('closed', this.error);
  }

  /** After offline (or a closed failure the app has fixed, e.g. a refreshed identity): start again now. */
  retry(): void {
    if (this.stopped || this.state === 'live' || this.state === 'connecting') return;
    clearTimeout(this.timer);
    this.outageStart = 0;
    this.attempt = 0;
    this.set('connecting', null);
    this.connect();
  }

  /** Drops the current connection as a network failure would (for tests and "reconnect now" buttons). */
  reconnect(): void {
    if (this.stopped || !this.unsubscribe) return;
    this.unsubscribe();
    this.unsubscribe = undefined;
    this.failed({ code: 'NETWORK', retryable: true, message: 'reconnect requested' } as TurngateError);
  }

  private connect(): void {
    if (this.stopped) return;
    const after = this.folder.position;
    this.unsubscribe = this.transport.subscribe(
      RoomJournalDocument,
      { conversationId: this.roomId, after },
      {
        open: () => {
          // Accepted: the outage (if any) is over.
          this.reauthenticated = false;
          this.outageStart = 0;
          this.attempt = 0;
          if (this.state !== 'live') this.set('live', null);
        },
        next: (data) => {
          if (this.folder.apply(data.journal)) {
            this.entries.push(data.journal);
            if (this.entries.length > this.maxEntries) this.entries = this.entries.slice(-this.maxEntries);
            this.outageStart = 0;
            this.attempt = 0;
            this.state = 'live';
            this.error = null;
            this.emit();
          }
        },
        error: (err) => {
          this.unsubscribe = undefined;
          this.failed(err);
        },
        complete: () => {
          // The server ended the stream without an error: follow on.
          this.unsubscribe = undefined;
          this.failed({ code: 'UNAVAILABLE', retryable: true, message: 'stream completed' } as TurngateError);
        },
      },
    );
  }

  private failed(err: TurngateError): void {
    if (this.stopped) return;
    if (err.code === 'UNAUTHENTICATED' && !this.reauthenticated) {
      // Ask for the envelope again (the app may refresh it): a new one
      // gets one more try, the same one fails closed.
      this.reauthenticated = true;
      const sent = this.transport.lastIdentity;
      this.transport.identity(true).then(
        (fresh) => (fresh !== sent ? this.connect() : this.failed(err)),
        () => this.failed(err),
      );
      return;
    }
    if (!err.retryable) {
      // Fail closed: no retry loop.
      this.stopped = true;
      this.set('closed', err);
      return;
    }
    const now = Date.now();
    if (!this.outageStart) this.outageStart = now;
    if (now - this.outageStart >= this.policy.windowMs) {
      this.set('offline', err);
      return;
    }
    const wait = Math.min(backoff(this.policy, this.attempt++, err.retryAfterMs), Math.max(0, this.outageStart + this.policy.windowMs - now));
    this.set('reconnecting', err);
    this.timer = setTimeout(() => {
      if (Date.now() - this.outageStart >= this.policy.windowMs) {
        this.set('offline', err);
        return;
      }
      this.connect();
    }, wait);
  }

  private set(state: ConnectionState, error: TurngateError | null): void {
    this.state = state;
    this.error = error;
    this.emit();
  }

  private makeSnapshot(): RoomSnapshot {
    return {
      roomId: this.roomId,
      entries: this.entries.slice(),
      turns: this.folder.turns(),
      state: this.state,
      error: this.error,
      position: this.folder.position,
    };
  }

  private emit(): void {
    this.snapshot = this.makeSnapshot();
    for (const l of this.listeners) l();
  }
}
