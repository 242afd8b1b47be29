/**
 * @turngate/client/react: useRoom, a room's live transcript as React state.
 * React is a peer dependency.
 */
import { useCallback, useEffect, useMemo, useState, useSyncExternalStore } from 'react';

import type { TurngateClient } from './client.js';
import type { ApprovalDecision } from './generated/graphql.js';
import type { RoomSnapshot, RoomStream } from './room.js';

export interface UseRoom extends RoomSnapshot {
  /** Submits a message to the room (a fresh idempotency key, re-sent on retryable failures). */
  send(text: string): Promise<void>;
  /** Steers a turn. */
  steer(turnId: string, text: string): Promise<void>;
  /** Cancels a turn. */
  cancel(turnId: string): Promise<void>;
  /** Decides an approval. */
  approve(approvalId: string, decision: ApprovalDecision): Promise<void>;
  /** After offline: try again now. */
  retry(): void;
  /** The stream itself. */
  stream: RoomStream | null;
}

const empty = (roomId: string): RoomSnapshot => ({ roomId, entries: [], turns: [], state: 'connecting', error: null, position: 0 });

/** A room's entries, turns and connection state, with its commands. Pass roomId null to follow nothing. */
export function useRoom(client: TurngateClient, roomId: string | null): UseRoom {
  const [stream, setStream] = useState<RoomStream | null>(null);
  useEffect(() => {
    if (!roomId) return;
    const s = client.room(roomId);
    setStream(s);
    return () => {
      s.stop();
      setStream(null);
    };
  }, [client, roomId]);
  const subscribe = useCallback((l: () => void) => (stream ? stream.subscribe(l) : () => undefined), [stream]);
  const idle = useMemo(() => empty(roomId ?? ''), [roomId]);
  const snap = useSyncExternalStore(subscribe, () => (stream ? stream.getSnapshot() : idle));
  const send = useCallback(async (text: string) => {
    if (roomId) await client.submit(roomId, text);
  }, [client, roomId]);
  const steer = useCallback(async (turnId: string, text: string) => {
    const commandId = globalThis.crypto.randomUUID();
    stream?.notePendingSteer(turnId, commandId, text);
    await client.steer(turnId, text, { commandId });
  }, [client, stream]);
  const cancel = useCallback(async (turnId: string) => {
    await client.cancel(turnId);
  }, [client]);
  const approve = useCallback(async (approvalId: string, decision: ApprovalDecision) => {
    await client.decideApproval(approvalId, decision);
  }, [client]);
  const retry = useCallback(() => stream?.retry(), [stream]);
  return { ...snap, send, steer, cancel, approve, retry, stream };
}
