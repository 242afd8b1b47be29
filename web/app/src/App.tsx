import { createClient, type TurngateClient, type TurnView, type TurngateError } from '@turngate/client';
import { useRoom, type UseRoom } from '@turngate/client/react';
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState, type FormEvent } from 'react';

import { citationAnchor, copyCode, renderAnswer } from './markdown';

/** A demo member the dev page may act as. */
export interface DevMember {
  email: string;
  name: string;
  token: string;
}

/** What the server tells the page (../app.go). */
export interface PageConfig {
  endpoint: string;
  header: string;
  /** Dev mode on a loopback address: the demo members; null otherwise. */
  dev: { members: DevMember[] } | null;
}

declare global {
  interface Window {
    /**
     * The production hook: the host page defines it before loading the
     * app, returning the member's current identity envelope from the
     * organisation's identity provider. It is asked again after the
     * server answers UNAUTHENTICATED, so it may refresh.
     */
    turngateIdentity?: () => string | Promise<string>;
  }
}

type Room = Awaited<ReturnType<TurngateClient['conversations']>>[number];
type Me = Awaited<ReturnType<TurngateClient['me']>>;

const memberKey = 'turngate.member';

/** The room named in the address (#room=<id>), so a reload returns to it. */
function roomFromHash(): string | null {
  return new URLSearchParams(location.hash.slice(1)).get('room');
}

export function App({ config }: { config: PageConfig }) {
  const members = config.dev?.members ?? [];
  const [email, setEmail] = useState(() => {
    const saved = localStorage.getItem(memberKey);
    return members.find((m) => m.email === saved)?.email ?? members[0]?.email ?? '';
  });
  const client = useMemo(() => {
    const member = members.find((m) => m.email === email);
    const identity = async () => {
      if (member) return member.token;
      if (typeof window.turngateIdentity === 'function') return window.turngateIdentity();
      throw new Error('no identity: this page needs the organisation\'s sign-in (window.turngateIdentity)');
    };
    return createClient({ url: config.endpoint, header: config.header, identity });
  }, [config, email]);
  useEffect(() => () => client.close(), [client]);

  const [me, setMe] = useState<Me | null>(null);
  const [rooms, setRooms] = useState<Room[]>([]);
  const [roomId, setRoomId] = useState<string | null>(roomFromHash);
  const [problem, setProblem] = useState<string | null>(null);

  const loadRooms = useCallback(async () => {
    try {
      const [m, rs] = await Promise.all([client.me(), client.conversations(100)]);
      setMe(m);
      setRooms(rs);
      setProblem(null);
      return rs;
    } catch (err) {
      setProblem(describe(err as TurngateError));
      return [];
    }
  }, [client]);

  useEffect(() => {
    let live = true;
    void loadRooms().then((rs) => {
      // Dev mode opens the member's most recent room.
      if (live && !roomFromHash() && rs.length > 0) select(rs[0].id);
    });
    return () => {
      live = false;
    };
  }, [loadRooms]);

  useEffect(() => {
    const onHash = () => setRoomId(roomFromHash());
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);

  const select = (id: string) => {
    location.hash = `room=${id}`;
    setRoomId(id);
  };
  const switchMember = (next: string) => {
    localStorage.setItem(memberKey, next);
    history.replaceState(null, '', location.pathname);
    setRoomId(null);
    setEmail(next);
  };

  const room = rooms.find((r) => r.id === roomId) ?? null;
  return (
    <div className="app">
      <nav className="sidebar" aria-label="Rooms">
        <h1>turngate</h1>
        {members.length > 0 && (
          <label className="field">
            <span>Signed in as</span>
            <select value={email} onChange={(e) => switchMember(e.target.value)}>
              {members.map((m) => (
                <option key={m.email} value={m.email}>
                  {m.name} ({m.email})
                </option>
              ))}
            </select>
          </label>
        )}
        {members.length === 0 && me && <p className="who">Signed in as {me.displayName}</p>}
        <ul className="rooms">
          {rooms.map((r) => (
            <li key={r.id}>
              <button type="button" aria-current={r.id === roomId ? 'page' : undefined} onClick={() => select(r.id)}>
                {r.title}
                <small>{r.kind === 'SHARED' ? ` · shared, ${r.members.length} members` : ' · private'}</small>
              </button>
            </li>
          ))}
        </ul>
        <NewRoom client={client} onCreated={async (id) => { await loadRooms(); select(id); }} />
        <p className="links"><a href="/graphiql/">GraphiQL</a></p>
      </nav>
      <main className="main">
        {problem && <p role="alert" className="problem">{problem}</p>}
        {roomId && me ? (
          <RoomView key={`${email}/${roomId}`} client={client} roomId={roomId} room={room} me={me} header={config.header} onChanged={loadRooms} />
        ) : (
          <p className="empty">{rooms.length ? 'Choose a room.' : 'No rooms yet: create one.'}</p>
        )}
      </main>
    </div>
  );
}

function describe(err: TurngateError | Error): string {
  const code = 'code' in err ? err.code : '';
  switch (code) {
    case 'UNAUTHENTICATED':
      return 'You are not signed in, or your sign-in expired.';
    case 'NOT_FOUND':
    case 'FORBIDDEN':
      return 'This room is not available to you.';
    case 'NETWORK':
    case 'UNAVAILABLE':
      return 'The server cannot be reached.';
    case 'RATE_LIMITED':
      return 'Too many requests: wait a moment.';
    default:
      return err.message;
  }
}

function NewRoom({ client, onCreated }: { client: TurngateClient; onCreated: (id: string) => void }) {
  const [title, setTitle] = useState('');
  const [shared, setShared] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const create = async (e: FormEvent) => {
    e.preventDefault();
    if (!title.trim()) return;
    try {
      const r = await client.createConversation(title.trim(), shared ? 'SHARED' : 'PRIVATE');
      setTitle('');
      onCreated(r.id);
    } catch (err) {
      setError(describe(err as TurngateError));
    }
  };
  return (
    <form className="new-room" onSubmit={create} aria-label="New room">
      <input aria-label="Room title" placeholder="New room title" value={title} onChange={(e) => setTitle(e.target.value)} />
      <label className="check">
        <input type="checkbox" checked={shared} onChange={(e) => setShared(e.target.checked)} /> shared
      </label>
      <button type="submit">Create room</button>
      {error && <p role="alert">{error}</p>}
    </form>
  );
}

const stateText: Record<UseRoom['state'], string> = {
  connecting: 'Connecting…',
  live: 'Live',
  reconnecting: 'Reconnecting…',
  offline: 'Offline',
  closed: 'Closed',
};

interface RoomProps {
  client: TurngateClient;
  roomId: string;
  room: Room | null;
  me: Me;
  header: string;
  onChanged: () => void;
}

function RoomView({ client, roomId, room, me, header, onChanged }: RoomProps) {
  const r = useRoom(client, roomId);
  const owner = room?.owner.id === me.id;
  const mayCommand = (t: TurnView) => t.authorId === me.id || (room?.kind === 'SHARED' && owner);
  const active = [...r.turns].reverse().find((t) => (t.state === 'RUNNING' || t.state === 'QUEUED') && mayCommand(t));
  const closed = r.state === 'closed' && r.error;
  const announcement = useAnnouncement(r.turns);
  const transcript = useStickToBottom(r.turns);
  const stop = useCallback(
    (id: string) => r.cancel(id),
    [r.cancel],
  );
  // Esc stops the streaming turn, as the Stop button does (ChatGPT and
  // Claude do the same); an open dialog or menu would take Esc first.
  useEffect(() => {
    if (!active) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape' || e.defaultPrevented) return;
      e.preventDefault();
      void stop(active.id).catch(() => {});
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [active, stop]);
  return (
    <div className="room">
      <header className="room-header">
        {owner && room ? (
          <RoomTitle client={client} room={room} onRenamed={onChanged} />
        ) : (
          <h2>{room?.title ?? 'Room'}</h2>
        )}
        <span role="status" aria-label="Connection" className={`conn conn-${r.state}`}>
          {stateText[r.state]}
        </span>
        {r.state === 'offline' && (
          <button type="button" onClick={r.retry}>Retry</button>
        )}
      </header>
      {closed ? (
        <p role="alert" className="problem">{describe(r.error!)}</p>
      ) : (
        <>
          {room?.kind === 'SHARED' && owner && <Invite client={client} roomId={roomId} onInvited={onChanged} />}
          {/* Not a live region: a screen reader would read every token.
              The visually hidden status below says once that an answer
              finished. */}
          <section className="transcript" aria-label="Transcript" ref={transcript.ref} onScroll={transcript.onScroll} tabIndex={0}>
            {r.turns.length === 0 && r.state === 'live' && <p className="empty">No messages yet.</p>}
            {r.turns.map((t) => (
              <Turn
                key={t.id}
                turn={t}
                me={me}
                mayDecide={mayCommand(t)}
                onDecide={r.approve}
                onResend={t.authorId === me.id ? () => void r.send(t.input).catch(() => {}) : undefined}
                header={header}
                client={client}
              />
            ))}
          </section>
          <div className="sr-only" role="status" aria-live="polite" aria-label="Announcements">
            {/* Keyed by turn, so a regenerated answer with the same words is announced again. */}
            {announcement && <span key={announcement.id}>{announcement.text}</span>}
          </div>
          <Composer r={r} active={active} />
        </>
      )}
    </div>
  );
}

const isFinished = (t: TurnView) => t.state === 'COMPLETED' || t.state === 'FAILED' || t.state === 'CANCELLED';

/**
 * The short notice a screen reader hears once a turn it saw running
 * finishes: who answered and how it ended, and the answer's first words.
 * Turns already finished when the room opened are not announced.
 */
function useAnnouncement(turns: readonly TurnView[]): { id: string; text: string } | null {
  const pending = useRef(new Set<string>());
  const [said, setSaid] = useState<{ id: string; text: string } | null>(null);
  useEffect(() => {
    for (const t of turns) {
      if (!isFinished(t)) {
        pending.current.add(t.id);
      } else if (pending.current.delete(t.id)) {
        setSaid({ id: t.id, text: notice(t) });
      }
    }
  }, [turns]);
  return said;
}

function notice(t: TurnView): string {
  if (t.state !== 'COMPLETED') return `${assistantName}: ${status(t) ?? 'the turn ended.'}`;
  const plain = t.answer.replace(/\[doc:[^\]]*\]/g, '').replace(/[#*_`>]/g, '').replace(/\s+/g, ' ').trim();
  const words = plain.length > 140 ? `${plain.slice(0, 140).replace(/\s\S*$/, '')}…` : plain;
  return `${assistantName} answered: ${words}`;
}

/**
 * Keeps the transcript scrolled to its end as answers stream, until the
 * reader scrolls up; scrolling back to the end sticks again.
 */
function useStickToBottom(turns: readonly TurnView[]) {
  const ref = useRef<HTMLElement>(null);
  const stuck = useRef(true);
  const onScroll = useCallback(() => {
    const el = ref.current;
    if (el) stuck.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
  }, []);
  useLayoutEffect(() => {
    const el = ref.current;
    if (el && stuck.current) el.scrollTop = el.scrollHeight;
  }, [turns]);
  return { ref, onScroll };
}

/** The room's title; its owner may rename it in place. */
function RoomTitle({ client, room, onRenamed }: { client: TurngateClient; room: Room; onRenamed: () => void }) {
  const [editing, setEditing] = useState(false);
  const [title, setTitle] = useState(room.title);
  const [error, setError] = useState<string | null>(null);
  const rename = async (e: FormEvent) => {
    e.preventDefault();
    const next = title.trim();
    if (!next || next === room.title) {
      setEditing(false);
      return;
    }
    try {
      await client.renameConversation(room.id, next);
      setError(null);
      setEditing(false);
      onRenamed();
    } catch (err) {
      setError(describe(err as TurngateError));
    }
  };
  if (!editing) {
    return (
      <>
        <h2>{room.title}</h2>
        <button type="button" className="quiet" onClick={() => { setTitle(room.title); setEditing(true); }}>Rename</button>
      </>
    );
  }
  return (
    <form className="rename" onSubmit={rename} aria-label="Rename room" onKeyDown={(e) => { if (e.key === 'Escape') { e.preventDefault(); setEditing(false); } }}>
      <input aria-label="New title" value={title} maxLength={200} autoFocus onChange={(e) => setTitle(e.target.value)} />
      <button type="submit">Save</button>
      <button type="button" onClick={() => setEditing(false)}>Cancel</button>
      {error && <span role="alert" className="problem">{error}</span>}
    </form>
  );
}

function Invite({ client, roomId, onInvited }: { client: TurngateClient; roomId: string; onInvited: () => void }) {
  const [email, setEmail] = useState('');
  const [note, setNote] = useState<string | null>(null);
  const invite = async (e: FormEvent) => {
    e.preventDefault();
    const who = email.trim();
    try {
      const { withheldTurns } = await client.addRoomMember(roomId, who);
      setNote(joinedNote(who, withheldTurns));
      setEmail('');
      onInvited();
    } catch (err) {
      setNote(describe(err as TurngateError));
    }
  };
  return (
    <form className="invite" onSubmit={invite} aria-label="Invite">
      <input aria-label="Invite by email" type="email" placeholder="Invite by email" value={email} onChange={(e) => setEmail(e.target.value)} />
      <button type="submit">Invite</button>
      {note && <span role="status">{note}</span>}
    </form>
  );
}

/**
 * What the owner is told of a member just added: how many earlier turns
 * they will read withheld (they drew on documents the newcomer may not
 * read), when there are any.
 */
function joinedNote(email: string, withheld: number): string {
  if (withheld <= 0) return `${email} joined the room.`;
  const turns = withheld === 1 ? '1 earlier turn' : `${withheld} earlier turns`;
  return `${email} joined the room. ${turns} drew on documents they may not read: they will see ${withheld === 1 ? 'it' : 'those'} withheld.`;
}

const reasonText: Record<string, string> = {
  CANCELLED_BY_MEMBER: 'Stopped.',
  MEMBERSHIP_REVOKED: 'Its author left the room.',
  AUDIENCE_WITHHELD: 'The answer is withheld here: it drew on documents not everyone in this room may read.',
  BUDGET_EXHAUSTED: 'The assistant ran out of budget.',
  MODEL_RATE_LIMITED: 'The model is rate limited: try again shortly.',
  MODEL_UNAVAILABLE: 'The model is unavailable.',
};

function status(t: TurnView): string | null {
  switch (t.state) {
    case 'QUEUED':
      return t.queuePosition ? `Waiting: ${t.queuePosition} turn${t.queuePosition === 1 ? '' : 's'} ahead` : 'Waiting to start';
    case 'RUNNING':
      return t.attempt > 1 ? `Working (attempt ${t.attempt})…` : 'Working…';
    case 'COMPLETED':
      // A withheld turn's answer is the server's notice; say it here only
      // when there is no answer to show it.
      return t.withheld && !t.answer ? reasonText.AUDIENCE_WITHHELD : null;
    default:
      return reasonText[t.terminal?.reason ?? ''] ?? `Failed (${t.terminal?.reason.toLowerCase().replaceAll('_', ' ')}).`;
  }
}

/**
 * The name answers are labelled with. The schema does not tell members
 * which agent ran a turn (only its version), so every answer is the
 * room's assistant.
 */
const assistantName = 'Assistant';

interface TurnProps {
  turn: TurnView;
  me: Me;
  mayDecide: boolean;
  onDecide: UseRoom['approve'];
  /** Submits the turn's input again (a new turn, a new idempotency key): Retry or Regenerate. */
  onResend?: () => void;
  header: string;
  client: TurngateClient;
}

function Turn({ turn: t, me, mayDecide, onDecide, onResend, header, client }: TurnProps) {
  const html = useMemo(() => renderAnswer(t.answer, t.id, t.citations.map((c) => c.ref), !t.answered), [t.answer, t.id, t.citations, t.answered]);
  const line = status(t);
  return (
    <article className={`turn turn-${t.state.toLowerCase()}`} aria-label={`Turn by ${t.authorName || 'a member'}`} data-turn-id={t.id}>
      <div className={`message ${t.authorId === me.id ? 'mine' : ''}`}>
        <span className="author">{t.authorId === me.id ? `${t.authorName || 'Member'} (you)` : t.authorName || 'Member'}</span>
        <p>{t.input}</p>
      </div>
      {t.tools.length > 0 && (
        <ul className="tools" aria-label="Tool activity">
          {t.tools.map((x) => (
            <li key={x.callId}>
              <code>{x.name}</code> {x.status ?? 'running…'}
            </li>
          ))}
        </ul>
      )}
      {t.steers.length > 0 && (
        <ul className="steers" aria-label="Steering">
          {t.steers.map((s) => (
            <li key={s.commandId}>
              Steer: “{s.text}” · {s.state.toLowerCase()}
            </li>
          ))}
        </ul>
      )}
      {t.approvals.map((a) => (
        <div key={a.approvalId} className="approval" role="group" aria-label={`Approval for ${a.tool}`}>
          <p>
            The assistant asks to run <code>{a.tool}</code> with <code>{JSON.stringify(a.arguments)}</code>: <strong>{a.state.toLowerCase()}</strong>
          </p>
          {a.state === 'PENDING' && mayDecide && (
            <p>
              <button type="button" onClick={() => void onDecide(a.approvalId, 'APPROVE')}>Approve</button>{' '}
              <button type="button" onClick={() => void onDecide(a.approvalId, 'REJECT')}>Deny</button>
            </p>
          )}
          {a.state === 'PENDING' && !mayDecide && <p>Waiting for the author's decision.</p>}
        </div>
      ))}
      {/* An attempt a crash cut off: marked, its partial text folded away,
          never joined to the answer that was written again below it. */}
      {t.interrupted.map((p) => (
        <details key={p.attempt} className="interrupted" data-attempt={p.attempt}>
          <summary>Interrupted: attempt {p.attempt} stopped mid-answer, and the answer was written again from the start.</summary>
          <p>{p.text}</p>
        </details>
      ))}
      {(t.answer || t.state === 'RUNNING') && <span className="author answer-author">{assistantName}</span>}
      {t.answer && (
        <div
          className={t.withheld ? 'answer withheld' : 'answer'}
          data-answered={t.answered ? 'true' : 'false'}
          onClick={(e) => copyCode(e.target)}
          dangerouslySetInnerHTML={{ __html: html }}
        />
      )}
      {t.citations.length > 0 && (
        <ol className="citations" aria-label="Sources">
          {t.citations.map((c, i) => (
            <li key={c.id} id={citationAnchor(t.id, i)}>
              <strong>{c.source}</strong>
              <blockquote>{c.passage}</blockquote>
            </li>
          ))}
        </ol>
      )}
      {t.artifacts.length > 0 && (
        <ul className="artifacts" aria-label="Artifacts">
          {t.artifacts.map((a) => (
            <li key={a.id}>
              <button type="button" onClick={() => void download(client, header, a.downloadUrl, a.name)}>
                Download {a.name}
              </button>{' '}
              <small>{a.mediaType}, {a.size} bytes</small>
            </li>
          ))}
        </ul>
      )}
      {line && <p className="turn-status">{line}</p>}
      {onResend && isFinished(t) && !t.withheld && (
        <p className="turn-actions">
          <button type="button" onClick={onResend}>{t.state === 'COMPLETED' ? 'Regenerate' : 'Retry'}</button>
        </p>
      )}
    </article>
  );
}

/** Downloads an artifact: the download needs the identity header, so it is fetched, then saved. */
async function download(client: TurngateClient, header: string, url: string, name: string) {
  const token = await client.transport.identity();
  const res = await fetch(url, { headers: { [header]: token } });
  if (!res.ok) return;
  const href = URL.createObjectURL(await res.blob());
  const a = document.createElement('a');
  a.href = href;
  a.download = name;
  a.click();
  URL.revokeObjectURL(href);
}

function Composer({ r, active }: { r: UseRoom; active: TurnView | undefined }) {
  const [text, setText] = useState('');
  const [steer, setSteer] = useState('');
  const [error, setError] = useState<string | null>(null);
  const send = async (e: FormEvent) => {
    e.preventDefault();
    const t = text.trim();
    if (!t) return;
    setText('');
    try {
      await r.send(t);
      setError(null);
    } catch (err) {
      setText(t);
      setError(describe(err as TurngateError));
    }
  };
  const doSteer = async (e: FormEvent) => {
    e.preventDefault();
    if (!active || !steer.trim()) return;
    const s = steer.trim();
    setSteer('');
    await r.steer(active.id, s).catch((err) => setError(describe(err as TurngateError)));
  };
  return (
    <div className="composer">
      {active && (
        <form className="steer" onSubmit={doSteer} aria-label="Steer the running turn">
          <input aria-label="Steer" placeholder="Steer the answer…" value={steer} onChange={(e) => setSteer(e.target.value)} />
          <button type="submit">Steer</button>
          <button type="button" className="stop" aria-keyshortcuts="Escape" title="Stop (Esc)" onClick={() => void r.cancel(active.id).catch((err) => setError(describe(err as TurngateError)))}>
            Stop
          </button>
        </form>
      )}
      <form className="send" onSubmit={send}>
        <textarea
          aria-label="Message"
          placeholder="Message the assistant…"
          rows={2}
          value={text}
          onChange={(e) => setText(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey) {
              e.preventDefault();
              (e.currentTarget.form as HTMLFormElement).requestSubmit();
            }
          }}
        />
        <button type="submit">Send</button>
      </form>
      {error && <p role="alert" className="problem">{error}</p>}
    </div>
  );
}
