// What a member added later reads of a room's history, and what its owner
// is told, against a real turngate.
import { afterEach, describe, expect, it } from 'vitest';

import { newId, type RoomStream, type TurngateClient, type TurnView } from '../src/index.js';
import { clientFor } from './world.js';

const open: RoomStream[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.stop();
});

function follow(c: TurngateClient, room: string): RoomStream {
  const s = c.room(room);
  open.push(s);
  return s;
}

/** The turn's view once the stream has its terminal. */
async function ended(s: RoomStream, id: string): Promise<TurnView> {
  const snap = await s.until((x) => x.turns.find((t) => t.id === id)?.terminal != null);
  return snap.turns.find((t) => t.id === id)!;
}

describe('a withheld turn', () => {
  it('folds to the notice, live and replayed, and the owner is told how many turns a newcomer reads withheld', async () => {
    const alice = await clientFor('alice@example.com');
    // Carol and dave may not read the launch plan; they exist once signed in.
    for (const who of ['carol@example.com', 'dave@example.com']) await (await clientFor(who)).me();
    const room = (await alice.createConversation(`Launch ${newId()}`, 'SHARED')).id;
    const live = follow(alice, room);
    await live.until((x) => x.state === 'live');
    const turn = await alice.submit(room, 'When is the launch?');
    await live.until((x) => (x.turns.find((t) => t.id === turn.id)?.answer.length ?? 0) > 0);

    // Carol joins while the answer streams: the streaming turn, which read
    // the launch plan, reads withheld to her already, and its publication
    // then withholds the answer from the whole room.
    const carol = await alice.addRoomMember(room, 'carol@example.com');
    expect(carol.withheldTurns).toBe(1);
    expect(carol.room.id).toBe(room);
    expect(carol.room.members.map((m) => m.member.email)).toContain('carol@example.com');

    const withheld = (t: TurnView) => {
      expect(t.withheld).toBe(true);
      expect(t.terminal).toEqual({ outcome: 'COMPLETED', reason: 'AUDIENCE_WITHHELD' });
      expect(t.answered).toBe(true);
      expect(t.answer).toContain('withheld');
      expect(t.answer).not.toContain('11 December');
      expect(t.artifacts).toEqual([]);
    };
    // Alice saw the answer stream: her fold now shows the notice alone.
    const seen = await ended(live, turn.id);
    withheld(seen);
    expect((await alice.turn(turn.id))?.answer).toBe(seen.answer);

    // Dave joins afterwards: the owner is told he reads one earlier turn
    // withheld, and his fold replays it so from position 0, over SSE and
    // over WebSocket; so does carol's.
    const dave = await alice.addRoomMember(room, 'dave@example.com');
    expect(dave.withheldTurns).toBe(1);
    for (const transport of ['sse', 'ws'] as const) {
      const d = await clientFor('dave@example.com', { transport });
      const v = await ended(follow(d, room), turn.id);
      withheld(v);
      expect(v.answer).toBe(seen.answer);
      expect((await d.turn(turn.id))?.answer).toBe(v.answer);
    }
    withheld(await ended(follow(await clientFor('carol@example.com'), room), turn.id));
  });
});
