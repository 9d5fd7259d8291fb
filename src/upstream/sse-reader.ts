// Reading a Server-Sent Events body, the way every HTTP client of mcpmux gets its server's
// messages (Streamable HTTP answers and GET stream, legacy HTTP+SSE, `mcpmux connect`), with a
// bound on each event.

import { createParser, type EventSourceMessage } from 'eventsource-parser';

export class TooLargeError extends Error {
  constructor(readonly bytes: number) {
    super(`message of ${bytes} bytes exceeds the limit`);
  }
}

/**
 * Reads an SSE body, calling `on.event` per event, until it ends (resolves), breaks (rejects),
 * or `signal` aborts (resolves). An event over `maxBytes` rejects with TooLargeError; the parser's
 * own buffer is capped too, so a never-ending event cannot grow memory without bound.
 * `on.drained`, if given, is awaited after each chunk's events: the next chunk is read only then
 * (a reader that passes messages on to a slower consumer applies its backpressure here).
 */
export async function readSse(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
  signal: AbortSignal,
  on: { event(ev: EventSourceMessage): void; retry?(ms: number): void; drained?(): Promise<void> },
): Promise<void> {
  if (!body) return;
  const reader = body.getReader();
  const cancel = (): void => void reader.cancel().catch(() => {});
  if (signal.aborted) return cancel();
  signal.addEventListener('abort', cancel, { once: true });
  let tooLarge: number | undefined;
  const parser = createParser({
    onEvent: (ev) => {
      if (tooLarge !== undefined || signal.aborted) return;
      const bytes = Buffer.byteLength(ev.data);
      if (bytes > maxBytes) tooLarge = bytes;
      else on.event(ev);
    },
    onRetry: (ms) => on.retry?.(ms),
    onError: (err) => {
      if (err.type === 'max-buffer-size-exceeded') tooLarge ??= maxBytes + 1;
    },
    // Characters, not bytes: a generous bound on buffered text; the byte check is above.
    maxBufferSize: maxBytes + 4096,
  });
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || signal.aborted) return;
      parser.feed(decoder.decode(value, { stream: true }));
      if (tooLarge !== undefined) {
        cancel();
        throw new TooLargeError(tooLarge);
      }
      if (on.drained) await on.drained();
    }
  } finally {
    signal.removeEventListener('abort', cancel);
  }
}
