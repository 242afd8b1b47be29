// Where the example gets its identity envelope, as turngate's own chat app
// does (web/app): in production, from the host page's sign-in through
// window.turngateIdentity; in dev mode, from the demo members' envelopes
// that a dev-mode turngate renders into its chat page for a visitor on this
// machine. serve.mjs passes that page through at /turngate/, so the
// example reads it on its own origin.

/** A demo member a dev-mode server lets this machine act as. */
export interface DevMember {
  email: string;
  name: string;
  token: string;
}

declare global {
  interface Window {
    /** The production hook: the member's current envelope from the organisation's sign-in. */
    turngateIdentity?: () => string | Promise<string>;
  }
}

/** The dev page's demo members: none when the server is not in dev mode (or not on this machine). */
export async function devMembers(page = '/turngate/'): Promise<DevMember[]> {
  const res = await fetch(page);
  if (!res.ok) return [];
  const html = await res.text();
  const json = new DOMParser().parseFromString(html, 'text/html').getElementById('config')?.textContent;
  const config = JSON.parse(json ?? '{}') as { dev?: { members: DevMember[] } | null };
  return config.dev?.members ?? [];
}
