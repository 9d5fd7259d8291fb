// A test's legacy HTTP+SSE host: GET /sse, the endpoint event, then each message event's data.

import { waitFor } from './harness.js';

export interface LegacySse {
  /** The endpoint the stream named (its `sessionId` query names the session). */
  readonly endpoint: URL;
  /** POSTs a body to the endpoint the stream named (with `headers` besides the content type). */
  post(body: string, headers?: Record<string, string>): Promise<Response>;
  /** Aborts the stream and waits for its reader to stop. */
  close(): Promise<void>;
}

/** Opens `${base}/sse`, calls `onData` with each message event's data, resolves once the endpoint event came. */
export async function openLegacySse(base: string, onData: (data: string) => void): Promise<LegacySse> {
  const ac = new AbortController();
  const res = await fetch(`${base}/sse`, { headers: { accept: 'text/event-stream' }, signal: ac.signal });
  let endpoint: string | undefined;
  const pump = (async () => {
    const dec = new TextDecoder();
    let buffered = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffered += dec.decode(chunk, { stream: true });
        let at;
        while ((at = buffered.indexOf('\n\n')) >= 0) {
          const ev = buffered.slice(0, at);
          buffered = buffered.slice(at + 2);
          const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
          if (/^event: endpoint$/m.test(ev)) endpoint = data;
          else if (data) onData(data);
        }
      }
    } catch {
      /* aborted at the end */
    }
  })();
  const at = new URL(await waitFor(() => endpoint, { what: 'the endpoint event' }), base);
  return {
    endpoint: at,
    post: (body, headers = {}) => fetch(at, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body }),
    close: async () => {
      ac.abort();
      await pump;
    },
  };
}
