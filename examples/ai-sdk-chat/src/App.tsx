// A chat on the AI SDK's useChat, talking to turngate through
// @turngate/client/ai-sdk. The chat's id is the room's; each room's Chat is
// made once and kept, so switching rooms leaves a running answer running
// (useChat stops a Chat it made itself when it unmounts, and for this
// transport a stop cancels the turn).
import { Chat, useChat } from '@ai-sdk/react';
import { createClient, type TurngateClient } from '@turngate/client';
import { TurngateChatTransport, type TurngateUIMessage } from '@turngate/client/ai-sdk';
import { useEffect, useMemo, useRef, useState, type FormEvent } from 'react';

import type { DevMember } from './identity';

type Room = Awaited<ReturnType<TurngateClient['conversations']>>[number];

const roomFromHash = () => new URLSearchParams(location.hash.slice(1)).get('room');

export function App({ members }: { members: DevMember[] }) {
  const [email, setEmail] = useState(() => members.find((m) => m.email === localStorage.getItem('example.member'))?.email ?? members[0]?.email ?? '');
  const { client, transport } = useMemo(() => {
    const member = members.find((m) => m.email === email);
    const client = createClient({
      url: '/graphql',
      identity: async () => {
        if (member) return member.token;
        if (typeof window.turngateIdentity === 'function') return window.turngateIdentity();
        throw new Error('no identity: sign in (window.turngateIdentity), or run turngate in dev mode');
      },
    });
    return { client, transport: new TurngateChatTransport<TurngateUIMessage>({ client }) };
  }, [members, email]);
  useEffect(() => () => {
    transport.close();
    client.close();
  }, [client, transport]);

  const [rooms, setRooms] = useState<Room[]>([]);
  const [roomId, setRoomId] = useState<string | null>(roomFromHash);
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => {
    client.conversations(100).then(
      (rs) => {
        setRooms(rs);
        if (!roomFromHash() && rs[0]) select(rs[0].id);
      },
      (err) => setProblem(String(err.message ?? err)),
    );
  }, [client]);
  useEffect(() => {
    const onHash = () => setRoomId(roomFromHash());
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  const select = (id: string) => {
    location.hash = `room=${id}`;
    setRoomId(id);
  };

  // One Chat per room, made once its history is loaded.
  const chats = useRef(new Map<string, Chat<TurngateUIMessage>>());
  const [chat, setChat] = useState<Chat<TurngateUIMessage> | null>(null);
  useEffect(() => {
    setChat(null);
    if (!roomId) return;
    const known = chats.current.get(roomId);
    if (known) {
      setChat(known);
      return;
    }
    let live = true;
    transport.loadMessages(roomId).then(
      (messages) => {
        if (!live) return;
        const c = new Chat<TurngateUIMessage>({ id: roomId, messages, transport });
        chats.current.set(roomId, c);
        setChat(c);
      },
      (err) => setProblem(String(err.message ?? err)),
    );
    return () => {
      live = false;
    };
  }, [roomId, transport]);

  return (
    <div className="app">
      <nav aria-label="Rooms">
        <h1>useChat × turngate</h1>
        {members.length > 0 && (
          <label>
            Signed in as{' '}
            <select
              value={email}
              onChange={(e) => {
                localStorage.setItem('example.member', e.target.value);
                chats.current.clear();
                setEmail(e.target.value);
              }}
            >
              {members.map((m) => (
                <option key={m.email} value={m.email}>
                  {m.name}
                </option>
              ))}
            </select>
          </label>
        )}
        <ul>
          {rooms.map((r) => (
            <li key={r.id}>
              <button type="button" aria-current={r.id === roomId ? 'page' : undefined} onClick={() => select(r.id)}>
                {r.title}
              </button>
            </li>
          ))}
        </ul>
      </nav>
      <main>
        {problem && <p role="alert">{problem}</p>}
        {chat ? <ChatView key={chat.id} chat={chat} client={client} /> : <p className="empty">{roomId ? 'Loading…' : 'Choose a room.'}</p>}
      </main>
    </div>
  );
}

function ChatView({ chat, client }: { chat: Chat<TurngateUIMessage>; client: TurngateClient }) {
  // resume: after a reload (or a replica's loss), pick up the room's running turn.
  const { messages, sendMessage, status, stop, error, regenerate } = useChat({ chat, resume: true });
  const [text, setText] = useState('');
  const busy = status === 'submitted' || status === 'streaming';
  const send = (e: FormEvent) => {
    e.preventDefault();
    if (!text.trim() || busy) return;
    void sendMessage({ text });
    setText('');
  };
  const last = messages.at(-1);
  return (
    <div className="chat">
      <section aria-label="Transcript" className="transcript">
        {messages.map((m) => (
          <Message key={m.id} message={m} client={client} />
        ))}
      </section>
      <p className="status" aria-label="Status">
        {status}
      </p>
      {error && <p role="alert">{error.message}</p>}
      <form className="composer" onSubmit={send}>
        <textarea aria-label="Message" value={text} rows={2} onChange={(e) => setText(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey) send(e);
          }}
        />
        {busy ? (
          <button type="button" onClick={() => void stop()}>
            Stop
          </button>
        ) : (
          <button type="submit">Send</button>
        )}
        {!busy && last?.role === 'assistant' && (
          <button type="button" onClick={() => void regenerate()}>
            Regenerate
          </button>
        )}
      </form>
    </div>
  );
}

function Message({ message: m, client }: { message: TurngateUIMessage; client: TurngateClient }) {
  // Text before the last new attempt is an interrupted attempt's.
  const restart = m.parts.findLastIndex((p) => p.type === 'data-attempt');
  const sources = m.parts.filter((p) => p.type === 'source-document' || p.type === 'source-url');
  return (
    <article data-role={m.role} data-turn-id={m.metadata?.turnId} data-state={m.metadata?.state} data-attempt={m.metadata?.attempt}>
      <p className="author">{m.role === 'user' ? (m.metadata?.authorName ?? 'You') : 'Assistant'}</p>
      {m.parts.map((p, i) => {
        switch (p.type) {
          case 'text':
            return (
              <div key={i} className={i < restart ? 'text interrupted' : 'text'}>
                {p.text}
              </div>
            );
          case 'dynamic-tool':
            return (
              <p key={i} className="tool">
                {p.toolName}: {p.state === 'output-available' ? 'ok' : p.state === 'output-error' ? p.errorText : 'running…'}
              </p>
            );
          case 'data-attempt':
            return (
              <p key={i} className="attempt">
                Attempt {p.data.attempt}: attempt {p.data.interrupted} was interrupted, the answer starts again.
              </p>
            );
          case 'data-steer':
            return (
              <p key={i} className="steer">
                Steered: {p.data.text} ({p.data.state.toLowerCase()})
              </p>
            );
          case 'data-approval':
            return (
              <div key={i} className="approval">
                {p.data.tool} wants to run: {p.data.state.toLowerCase()}
                {p.data.state === 'PENDING' && (
                  <>
                    {' '}
                    <button type="button" onClick={() => void client.decideApproval(p.data.approvalId, 'APPROVE')}>
                      Approve
                    </button>
                    <button type="button" onClick={() => void client.decideApproval(p.data.approvalId, 'REJECT')}>
                      Reject
                    </button>
                  </>
                )}
              </div>
            );
          case 'data-artifact':
            return (
              <p key={i} className="artifact">
                File: {p.data.name} ({p.data.size} bytes)
              </p>
            );
          default:
            return null;
        }
      })}
      {sources.length > 0 && (
        <ol className="sources" aria-label="Sources">
          {sources.map((s) => (
            <li key={s.sourceId}>{s.type === 'source-url' ? <a href={s.url}>{s.title ?? s.url}</a> : s.title}</li>
          ))}
        </ol>
      )}
      {m.role === 'assistant' && m.metadata?.state === 'CANCELLED' && <p className="ended">Stopped.</p>}
      {m.role === 'assistant' && m.metadata?.state === 'FAILED' && <p className="ended">Failed: {m.metadata.reason}</p>}
    </article>
  );
}
