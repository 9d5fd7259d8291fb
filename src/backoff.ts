// One backoff for everything that retries: upstream restarts, the HTTP upstream's stream
// reconnects, and `mcpmux connect`'s GET stream. Exponential, capped, with jitter, so that
// many retriers that failed together (a daemon restart, a network blip) do not retry together.

export interface Backoff {
  /** The first delay. */
  baseMs: number;
  /** Growth per attempt (default 2). */
  factor?: number;
  maxMs: number;
}

/**
 * The delay before retry number `attempt` (0 for the first): a random time between half and
 * all of min(maxMs, baseMs x factor^attempt) ("equal jitter": never less than half the step,
 * so a failing peer still gets room).
 */
export function backoffDelay(attempt: number, b: Backoff, random: () => number = Math.random): number {
  const step = Math.min(b.maxMs, b.baseMs * (b.factor ?? 2) ** attempt);
  return Math.round(step / 2 + (random() * step) / 2);
}
