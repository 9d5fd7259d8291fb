// Media types in HTTP headers, read as RFC 9110 says (section 12.5.1 and 8.3.1), not by
// substring: `application/jsonx` is not JSON, and `text/event-stream;q=0` refuses SSE.

/** The media type of a Content-Type value, lowercased, without parameters (`application/json`). */
export function mediaType(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  const semi = contentType.indexOf(';');
  return (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}

/**
 * How much an Accept header wants `type` (`text/event-stream`): the q of the most specific
 * range that matches it (exact, then `text/*`, then `*\/*`), 0 when none does. A missing header
 * accepts nothing here: MCP requires clients to send one.
 */
export function acceptQuality(accept: string | undefined, type: string): number {
  if (accept === undefined) return 0;
  const [major] = type.split('/');
  let best = 0;
  let q = 0;
  for (const part of accept.split(',')) {
    const [range, ...params] = part.split(';');
    const r = range!.trim().toLowerCase();
    const specificity = r === type ? 3 : r === `${major}/*` ? 2 : r === '*/*' ? 1 : 0;
    if (specificity === 0 || specificity <= best) continue;
    best = specificity;
    q = qualityOf(params);
  }
  return q;
}

function qualityOf(params: string[]): number {
  for (const p of params) {
    const [k, v] = p.split('=');
    if (k?.trim().toLowerCase() !== 'q') continue;
    const n = Number(v?.trim());
    return Number.isFinite(n) && n >= 0 && n <= 1 ? n : 1;
  }
  return 1;
}
