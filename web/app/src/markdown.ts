import DOMPurify from 'dompurify';
import { Marked } from 'marked';

/** A citation anchor's element id: per turn and index, so ids never clash. */
export const citationAnchor = (turnId: string, i: number) => `cite-${turnId}-${i}`;

const escapeHTML = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);

/**
 * Markdown (GFM) as the app renders it. An answer is model output, which
 * anyone who can put text in front of the model can steer, so it renders
 * Markdown only:
 *
 *  - raw HTML is shown as the text it is, never parsed as markup (a
 *    <style>, <form> or <script> in an answer reads as itself);
 *  - an image is a link to it, never fetched (an image from anywhere is a
 *    beacon that tells its host who read the answer, and when);
 *  - a task list's box is a character, not an <input>.
 */
const md = new Marked({
  async: false,
  gfm: true,
  breaks: false,
  renderer: {
    html({ text }) {
      return escapeHTML(text);
    },
    image({ href, text }) {
      return `<a href="${escapeHTML(href)}">${escapeHTML(`image: ${text || href}`)}</a>`;
    },
    checkbox({ checked }) {
      return checked ? '☑ ' : '☐ ';
    },
  },
});

/**
 * What DOMPurify keeps: the elements and attributes the Markdown above
 * produces, and nothing else — no class, id or style an answer could use to
 * pass for the app's own controls.
 */
const allowed = {
  ALLOWED_TAGS: ['a', 'blockquote', 'br', 'code', 'del', 'em', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr', 'li', 'ol', 'p', 'pre', 'strong',
    'table', 'tbody', 'td', 'th', 'thead', 'tr', 'ul'],
  ALLOWED_ATTR: ['href', 'align', 'start'],
  ALLOWED_URI_REGEXP: /^(?:https?:|#)/i,
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  RETURN_DOM_FRAGMENT: true as const,
};

/**
 * Links as an answer may carry them: a citation (#cite-…) stays on the
 * page; any other link must be http(s), opens in a new tab with
 * rel="noopener noreferrer" (the page it opens gets no handle on this one
 * and no Referer), carries its full address as its title and shows its
 * host beside its text, so "[your bank](https://evil.example)" reads
 * "your bank (evil.example)". Anything else is unwrapped into its text.
 */
function decorateLinks(root: DocumentFragment) {
  for (const a of [...root.querySelectorAll('a')]) {
    const href = a.getAttribute('href') ?? '';
    if (href.startsWith('#')) {
      a.className = 'cite';
      continue;
    }
    let url: URL | null = null;
    try {
      url = new URL(href);
    } catch {
      url = null;
    }
    if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
      a.replaceWith(...a.childNodes);
      continue;
    }
    a.className = 'external';
    a.setAttribute('href', url.href);
    a.setAttribute('target', '_blank');
    a.setAttribute('rel', 'noopener noreferrer');
    a.setAttribute('title', url.href);
    const text = (a.textContent ?? '').trim();
    if (text !== href && text !== url.href && text !== url.host) {
      const host = document.createElement('span');
      host.className = 'link-host';
      host.textContent = ` (${url.host})`;
      a.after(host);
    }
  }
}

/**
 * Each code block gets the app's own Copy button, added after sanitizing
 * (an answer cannot produce a button or a class); the page handles its
 * clicks by delegation (copyCode).
 */
function addCopyButtons(root: DocumentFragment) {
  for (const pre of [...root.querySelectorAll('pre')]) {
    const block = document.createElement('div');
    block.className = 'code-block';
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'copy';
    copy.textContent = 'Copy';
    copy.setAttribute('aria-label', 'Copy code');
    pre.replaceWith(block);
    block.append(copy, pre);
  }
}

/** Copies the code block whose Copy button was clicked, when the click was on one. */
export function copyCode(target: EventTarget) {
  const button = target instanceof Element ? target.closest('button.copy') : null;
  const code = button?.parentElement?.querySelector('pre')?.textContent;
  if (!button || code == null) return;
  void navigator.clipboard?.writeText(code).then(
    () => {
      button.textContent = 'Copied';
      setTimeout(() => (button.textContent = 'Copy'), 1500);
    },
    () => {
      button.textContent = 'Copy failed';
    },
  );
}

/** A citation marker, as the server's guard reads one (guard/cite.go). */
const marker = /\[((?:doc|turn|artifact):[A-Za-z0-9_.#:-]+)\]/g;

/** The start of a marker still arriving at the end of a streaming answer ("[doc:ab"). */
const partialMarker = /\[(?:d|do|doc|t|tu|tur|turn|a|ar|art|arti|artif|artifa|artifac|artifact)?(?::[A-Za-z0-9_.#:-]*)?$/;

/**
 * The answer as sanitized HTML: Markdown as above, each [ref] the answer
 * cites turned into a link to its passage below (while streaming, a
 * marker still arriving is held back), then DOMPurify with an
 * allow-list of what that Markdown produces, then the links decorated.
 */
export function renderAnswer(text: string, turnId: string, refs: readonly string[], streaming = false): string {
  let src = streaming ? text.replace(partialMarker, '') : text;
  refs.forEach((ref, i) => {
    src = src.split(`[${ref}]`).join(`[[${i + 1}]](#${citationAnchor(turnId, i)})`);
  });
  // While the answer streams its citations are not known yet (they come
  // with the final answer), so each marker becomes a chip numbered in
  // order of first
  // appearance, as the server numbers the citations it keeps (guard
  // CheckCitations), so the chip a reader sees streaming is the one the
  // final answer shows.
  const pending = new Map<string, number>();
  if (streaming) src = src.replace(marker, (_, ref: string) => {
    if (!pending.has(ref)) pending.set(ref, refs.length + pending.size);
    const i = pending.get(ref)!;
    return `[[${i + 1}]](#${citationAnchor(turnId, i)})`;
  });
  const html = md.parse(src) as string;
  const frag = DOMPurify.sanitize(html, allowed);
  decorateLinks(frag);
  addCopyButtons(frag);
  const out = document.createElement('div');
  out.append(frag);
  return out.innerHTML;
}
