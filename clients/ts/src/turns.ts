import type {
  AnswerArtifactFieldsFragment,
  ApprovalState,
  CitationFieldsFragment,
  EntryFieldsFragment,
  TerminalReason,
  TurnState,
} from './generated/graphql.js';
import type { JsonValue } from './json.js';

/** One journal entry, with every typed field the client asks for. */
export type Entry = EntryFieldsFragment;

/** A tool call as the room sees it. */
export interface ToolView {
  callId: string;
  name: string;
  arguments: JsonValue | null;
  /** null while the backend runs it; then ok, or why not. */
  status: string | null;
}

/** An approval as the room sees it. */
export interface ApprovalView {
  approvalId: string;
  tool: string;
  arguments: JsonValue;
  expiresAt: string;
  state: ApprovalState;
  decidedBy: string | null;
}

/** A steering instruction and what became of it. */
export interface SteerView {
  commandId: string;
  text: string;
  state: 'PENDING' | 'DELIVERED' | 'REJECTED';
}

/**
 * The partial answer of an attempt that a crash cut off: the run's next
 * attempt wrote its answer again from the start, so this text is not part
 * of the answer and is shown, if at all, as interrupted.
 */
export interface InterruptedAnswer {
  attempt: number;
  text: string;
}

/** A turn as the room's journal tells it so far. */
export interface TurnView {
  id: string;
  /** The position of its turn_accepted entry: its place in the lane. */
  position: number;
  authorId: string;
  authorName: string;
  input: string;
  state: TurnState;
  attempt: number;
  /**
   * The answer so far: the streamed text of the current attempt's current
   * draft, then the final answer. Text a new attempt or draft replaces is
   * never joined to it: a draft the run discarded (a steer delivered, or a
   * tool requested, after it) is dropped, and an interrupted attempt's
   * partial answer moves to interrupted.
   */
  answer: string;
  /** The partial answers of earlier attempts a crash cut off, oldest first. */
  interrupted: InterruptedAnswer[];
  /** Whether answer is the final, published answer (a turn_answer entry). */
  answered: boolean;
  /**
   * The turn is withheld from this viewer (terminal AUDIENCE_WITHHELD): it
   * drew on a document they may not read now (they joined later, or lost
   * access), or its answer was withheld from the whole room. answer is
   * then the server's withheld notice, never text of an earlier view.
   */
  withheld: boolean;
  citations: CitationFieldsFragment[];
  artifacts: AnswerArtifactFieldsFragment[];
  tools: ToolView[];
  approvals: ApprovalView[];
  steers: SteerView[];
  /** While QUEUED: how many unfinished turns are ahead of it in the room's lane (0: next). */
  queuePosition: number | null;
  terminal: { outcome: TurnState; reason: TerminalReason } | null;
}

const finished = (s: TurnState) => s === 'COMPLETED' || s === 'FAILED' || s === 'CANCELLED';

/**
 * Where a turn's current draft starts in its attempt's answer. The server
 * counts offsets from the attempt's start; a step that ends in a steer or a
 * tool request is not the answer (only the run's last step is), and the
 * next step's text continues the count: its first delta's offset becomes
 * the new draft's start.
 */
interface Draft {
  base: number;
  restart: boolean;
}

/**
 * Folds journal entries, in position order, into turn views. Feeding an
 * entry twice changes nothing (entries at or below the last position
 * applied are ignored), so a resumed stream that overlaps is harmless.
 */
export class TurnFolder {
  private readonly byId = new Map<string, TurnView>();
  private readonly order: TurnView[] = [];
  private readonly drafts = new Map<string, Draft>();
  private last: number;

  /** A folder that starts after position after (0: the beginning). */
  constructor(after = 0) {
    this.last = after;
  }

  /** The position of the last entry applied. */
  get position(): number {
    return this.last;
  }

  /** Applies e; reports whether it was new. */
  apply(e: Entry): boolean {
    if (e.seq <= this.last) return false;
    this.last = e.seq;
    if (!e.turnId) return true;
    let t = this.byId.get(e.turnId);
    if (!t) {
      if (e.kind !== 'TURN_ACCEPTED') return true; // its acceptance is before the stream's start
      t = {
        id: e.turnId,
        position: e.seq,
        authorId: e.accepted?.authorId ?? e.actorId ?? '',
        authorName: e.accepted?.authorName ?? '',
        input: e.text ?? '',
        state: 'QUEUED',
        attempt: 0,
        answer: '',
        interrupted: [],
        answered: false,
        withheld: false,
        citations: [],
        artifacts: [],
        tools: [],
        approvals: [],
        steers: [],
        queuePosition: null,
        terminal: null,
      };
      this.byId.set(t.id, t);
      this.order.push(t);
      this.requeue();
      return true;
    }
    const next: TurnView = { ...t };
    switch (e.kind) {
      case 'TURN_STARTED': {
        const attempt = e.started?.attempt ?? e.attempt;
        if (attempt !== next.attempt) this.newAttempt(next, attempt);
        if (!finished(next.state)) next.state = 'RUNNING';
        break;
      }
      case 'ANSWER_DELTA': {
        const d = e.delta;
        if (!d || next.answered) break;
        if (d.attempt > next.attempt) this.newAttempt(next, d.attempt);
        if (d.attempt < next.attempt) break; // a superseded attempt's text
        const draft = this.draft(next.id);
        if (draft.restart) {
          draft.base = d.offset;
          draft.restart = false;
        }
        const at = d.offset - draft.base;
        if (at < 0) break; // a discarded draft's text
        // offset says where the text goes: a repeat overlaps, never duplicates.
        if (at <= next.answer.length) next.answer = next.answer.slice(0, at) + d.text;
        else next.answer += d.text;
        break;
      }
      case 'TOOL_REQUESTED':
        this.discardDraft(next);
        if (e.tool) next.tools = [...next.tools, { callId: e.tool.callId, name: e.tool.name, arguments: e.tool.arguments, status: null }];
        break;
      case 'TOOL_COMPLETED':
        if (e.tool) {
          const tool = e.tool;
          const known = next.tools.some((x) => x.callId === tool.callId);
          next.tools = known
            ? next.tools.map((x) => (x.callId === tool.callId ? { ...x, status: tool.status } : x))
            : [...next.tools, { callId: tool.callId, name: tool.name, arguments: null, status: tool.status }];
        }
        break;
      case 'APPROVAL_REQUESTED':
        if (e.approvalRequest) next.approvals = [...next.approvals, { ...e.approvalRequest, state: 'PENDING', decidedBy: null }];
        break;
      case 'APPROVAL_DECIDED':
        if (e.approvalDecision) {
          const d = e.approvalDecision;
          next.approvals = next.approvals.map((a) => (a.approvalId === d.approvalId ? { ...a, state: d.state, decidedBy: d.decidedBy } : a));
        }
        break;
      case 'STEER_DELIVERED':
      case 'STEER_REJECTED':
        // A delivered steer gets the run a new step, which writes the
        // answer again with it.
        if (e.kind === 'STEER_DELIVERED') this.discardDraft(next);
        if (e.steer) {
          const s = e.steer;
          next.steers = [...next.steers.filter((x) => x.commandId !== s.commandId), { commandId: s.commandId, text: s.text, state: s.state as SteerView['state'] }];
        }
        break;
      case 'TURN_ANSWER':
        if (e.answer) {
          next.answer = e.answer.text;
          next.answered = true;
          next.citations = e.answer.citations;
          next.artifacts = e.answer.artifacts;
        }
        break;
      case 'TURN_TERMINAL':
        if (e.terminal) {
          next.terminal = e.terminal;
          next.state = e.terminal.outcome;
          if (e.terminal.reason === 'AUDIENCE_WITHHELD') {
            // The published answer is the notice; text streamed before the
            // turn was withheld from this viewer is not kept.
            next.withheld = true;
            next.interrupted = [];
            if (!next.answered) next.answer = '';
          }
        }
        break;
    }
    this.replace(next);
    if (e.kind === 'TURN_STARTED' || e.kind === 'TURN_TERMINAL') this.requeue();
    return true;
  }

  /**
   * Starts attempt on t: the partial answer of the attempt before it, cut
   * off by a crash, is kept apart as interrupted, never joined to the new
   * attempt's text, which starts again at offset 0.
   */
  private newAttempt(t: TurnView, attempt: number): void {
    if (t.answer && !t.answered) t.interrupted = [...t.interrupted, { attempt: t.attempt, text: t.answer }];
    if (!t.answered) t.answer = '';
    t.attempt = attempt;
    this.drafts.set(t.id, { base: 0, restart: false });
  }

  /** Drops t's current draft: the run's next step writes the answer anew. */
  private discardDraft(t: TurnView): void {
    if (t.answered) return;
    t.answer = '';
    this.draft(t.id).restart = true;
  }

  private draft(id: string): Draft {
    let d = this.drafts.get(id);
    if (!d) {
      d = { base: 0, restart: false };
      this.drafts.set(id, d);
    }
    return d;
  }

  /** Notes a steer sent but not yet delivered, so a view can show it pending. */
  pendingSteer(turnId: string, commandId: string, text: string): void {
    const t = this.byId.get(turnId);
    if (!t || t.steers.some((s) => s.commandId === commandId)) return;
    this.replace({ ...t, steers: [...t.steers, { commandId, text, state: 'PENDING' }] });
  }

  private replace(t: TurnView): void {
    this.byId.set(t.id, t);
    const i = this.order.findIndex((x) => x.id === t.id);
    this.order[i] = t;
  }

  /** Recomputes the queue positions of waiting turns. */
  private requeue(): void {
    let ahead = 0;
    for (const t of this.order) {
      const q = t.state === 'QUEUED' ? ahead : null;
      if (q !== t.queuePosition) this.replace({ ...t, queuePosition: q });
      if (!finished(t.state)) ahead++;
    }
  }

  /** The turns, oldest first. */
  turns(): TurnView[] {
    return this.order.slice();
  }

  get(id: string): TurnView | undefined {
    return this.byId.get(id);
  }
}
