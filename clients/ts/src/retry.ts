/** How reads and subscriptions retry on their own (the browser rule). */
export interface RetryPolicy {
  /** How long an outage may last before the state is "offline" (default 60 s). */
  windowMs: number;
  /** The first backoff (default 250 ms); each retry doubles it, up to maxDelayMs. */
  baseDelayMs: number;
  /** The longest backoff (default 5 s). */
  maxDelayMs: number;
}

export const defaultRetry: RetryPolicy = { windowMs: 60_000, baseDelayMs: 250, maxDelayMs: 5_000 };

/**
 * The wait before retry number attempt (0-based): "full jitter", a random
 * time up to the exponential bound, so clients that lost the same replica
 * do not come back in step. A server's retryAfterMs is a floor.
 */
export function backoff(policy: RetryPolicy, attempt: number, retryAfterMs = 0, random: () => number = Math.random): number {
  const bound = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(attempt, 20));
  return Math.max(retryAfterMs, Math.round(random() * bound));
}

/** Resolves after ms, or rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
