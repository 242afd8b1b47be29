// A program a web developer writes against the installed @turngate/client:
// it submits a question and prints the answer to the terminal as it
// streams, then how the turn ended and its sources.
import { createClient, TurngateError, type TurnView, type TurngateClient } from '@turngate/client';

const url = process.env.TURNGATE_URL;
const envelope = process.env.TURNGATE_IDENTITY;
if (!url || !envelope) throw new Error('set TURNGATE_URL and TURNGATE_IDENTITY');

const client = createClient({ url, identity: () => envelope });
const room = await client.createConversation('Installed from a tarball', 'PRIVATE');
const stream = client.room(room.id);
const turn = await client.submit(room.id, 'When is the launch?');

// Print each piece of the answer as it arrives.
let printed = '';
const show = (v: TurnView | undefined) => {
  if (v && v.answer.startsWith(printed) && v.answer.length > printed.length) {
    process.stdout.write(v.answer.slice(printed.length));
    printed = v.answer;
  }
};
const off = stream.subscribe(() => show(stream.turn(turn.id)));
const done = await stream.until((s) => s.turns.find((t) => t.id === turn.id)?.terminal != null);
off();
const view = done.turns.find((t) => t.id === turn.id)!;
show(view);
process.stdout.write('\n');
console.log(`-- ${view.terminal!.outcome} (${view.terminal!.reason}); sources: ${[...new Set(view.citations.map((c) => c.source))].join(', ')}`);
stream.stop();
client.close();

// The declarations are real: these misuses do not type-check (the
// expectations fail the build if the package's types were missing or any).
export function misuses(c: TurngateClient) {
  // @ts-expect-error a room id is a string
  void c.submit(42, 'text');
  // @ts-expect-error a conversation kind is PRIVATE or SHARED
  void c.createConversation('t', 'PUBLIC');
  const e: unknown = null;
  if (e instanceof TurngateError) {
    // @ts-expect-error codes are a closed set
    const nope: 'NOT_A_CODE' = e.code;
    void nope;
  }
}
