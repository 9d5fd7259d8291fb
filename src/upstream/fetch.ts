// fetch() for remote upstreams and what their answers need: redirects kept to the server's own
// origin, bodies read up to a limit, error bodies quoted in a line, fetch errors and URLs said
// safely. Used by both HTTP client transports and OAuth discovery.

const MAX_REDIRECTS = 5;
/** Characters of an error body quoted in the synthetic error. */
const EXCERPT_CHARS = 200;

/**
 * fetch() that follows redirects only within the URL's origin: the config's headers are
 * credentials for that server, and fetch would carry custom ones (X-Api-Key...) anywhere.
 */
export async function fetchSameOrigin(url: string, init: RequestInit): Promise<Response> {
  const origin = new URL(url).origin;
  let target = url;
  for (let hops = 0; ; hops++) {
    const res = await fetch(target, { ...init, redirect: 'manual' });
    const location = res.status >= 300 && res.status < 400 ? res.headers.get('location') : null;
    if (location === null) return res;
    await res.body?.cancel().catch(() => {});
    const next = new URL(location, target);
    if (next.origin !== origin) throw new Error(`refused a redirect to another origin (${next.origin})`);
    if (hops >= MAX_REDIRECTS) throw new Error(`more than ${MAX_REDIRECTS} redirects`);
    target = next.href;
  }
}

/** undici's "fetch failed" hides the useful part (ECONNREFUSED ...) in `cause`. */
export function describeFetchError(err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string; code?: string } };
  if (e?.cause?.message) return e.cause.message;
  return e?.message ?? String(err);
}

/** The URL without query, fragment or credentials: what we may log. */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid url)';
  }
}

export function mediaType(res: Response): string {
  return (res.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
}

/** Reads a whole body up to `maxBytes`; beyond that, stops reading and reports the size seen. */
export async function readBody(res: Response, maxBytes: number): Promise<{ text: string } | { tooLarge: number }> {
  const declared = Number(res.headers.get('content-length'));
  if (declared > maxBytes) {
    await res.body?.cancel().catch(() => {});
    return { tooLarge: declared };
  }
  const reader = res.body?.getReader();
  if (!reader) return { text: '' };
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      return { tooLarge: total };
    }
    chunks.push(value);
  }
  return { text: Buffer.concat(chunks).toString('utf8') };
}

/** A short, single-line description of an error body (a JSON-RPC error's message if it is one). */
export async function errorExcerpt(res: Response): Promise<string> {
  return excerptOf(await bodyText(res));
}

/** An error body's text (at most 16 KB; empty when there is none or it is larger). */
export async function bodyText(res: Response): Promise<string> {
  try {
    const body = await readBody(res, 16 * 1024);
    return 'tooLarge' in body ? '' : body.text;
  } catch {
    return '';
  }
}

/** An error body in a line: its JSON-RPC message if it is one, else its text. */
export function excerptOf(text: string): string {
  try {
    const m = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    if (typeof m === 'string') text = m;
  } catch {
    /* not JSON: quote the text */
  }
  return text.replace(/\s+/g, ' ').trim().slice(0, EXCERPT_CHARS);
}
