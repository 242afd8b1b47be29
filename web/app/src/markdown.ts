import DOMPurify from 'dompurify';
import { Marked } from 'marked';

const md = new Marked({ async: false, gfm: true, breaks: false });

/** A citation anchor's element id: per turn and index, so ids never clash. */
export const citationAnchor = (turnId: string, i: number) => `cite-${turnId}-${i}`;

/**
 * The answer as sanitized HTML: Markdown (GFM), each [ref] the answer
 * cites turned into a link to its passage below, then DOMPurify, which
 * keeps only inert markup (no script, no handlers, no javascript: URLs).
 */
export function renderAnswer(text: string, turnId: string, refs: readonly string[]): string {
  let src = text;
  refs.forEach((ref, i) => {
    src = src.split(`[${ref}]`).join(`[[${i + 1}]](#${citationAnchor(turnId, i)})`);
  });
  const html = md.parse(src) as string;
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, ALLOWED_URI_REGEXP: /^(?:https?:|#)/i });
}
