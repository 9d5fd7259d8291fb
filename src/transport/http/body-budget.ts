// How many bytes of POST bodies the daemon holds while reading them, all connections together.
// Each body may be up to limits.maxMessageBytes (16 MB by default), and until it is whole no
// quota has seen it: a thousand clients sending big bodies slowly would hold 16 GB. Past the
// budget a POST is refused at once with 503 and its connection closed (its body is not read).

/** The budget is this many maximal bodies: a few big ones at once, never a thousand. */
export const BODY_BUDGET_MESSAGES = 4;

export class BodyBudget {
  private used = 0;

  /** `max`: bytes of request bodies that may be held, being read, at once. */
  constructor(readonly max: number) {}

  /** Takes `n` bytes of the budget; false (nothing taken) when they do not fit. */
  take(n: number): boolean {
    if (this.used + n > this.max) return false;
    this.used += n;
    return true;
  }

  give(n: number): void {
    this.used = Math.max(0, this.used - n);
  }
}

/** The budget for bodies of at most `maxMessageBytes` each. */
export function bodyBudgetFor(maxMessageBytes: number): BodyBudget {
  return new BodyBudget(BODY_BUDGET_MESSAGES * maxMessageBytes);
}
