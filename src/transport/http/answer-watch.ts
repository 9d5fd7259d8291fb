// A JSON answer is written in one go; a host that does not read it leaves it waiting in the
// response's (and its socket's) buffer. Watched like any host-facing writer (backlog.ts): a
// host that takes nothing of it for the stuck time is cut. Never cut for its size: an answer
// is as large as it is (it is under limits.maxMessageBytes, or a batch of such).

import type { ServerResponse } from 'node:http';
import type { Logger } from '../../observe/logger.js';
import type { HostTransport } from '../../observe/events.js';
import { Backlog, unsentBytes, waitingOn } from '../backlog.js';

/** Something whose bytes still wait for the host. */
export interface Unread {
  readonly waiting: number;
}

/**
 * Watches `res` (an answer of `written` units just ended) until the host has read it or the
 * connection is gone; `done` runs then. Returns undefined (and watches nothing) when nothing waits.
 */
export function watchAnswer(res: ServerResponse, written: number, opts: { transport: HostTransport; log: Logger }, done?: (u: Unread) => void): Unread | undefined {
  if (res.destroyed || res.writableFinished || res.writableLength === 0) return undefined;
  const unread: Unread = {
    get waiting() {
      return waitingOn(res);
    },
  };
  const backlog = new Backlog({
    ...opts,
    maxBytes: Infinity,
    waiting: () => unread.waiting,
    unsent: () => unsentBytes(res.socket),
    cut: () => res.destroy(),
    resend: () => {},
  });
  backlog.wrote(written);
  let finished = false;
  const finish = (): void => {
    if (finished) return;
    finished = true;
    backlog.release();
    done?.(unread);
  };
  res.once('finish', finish);
  res.once('close', finish);
  return unread;
}
