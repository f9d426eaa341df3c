/**
 * Writes that must not be given up on — a paid answer, the start-up recovery — are retried while
 * storage fails (a full disk, an I/O error, a lock held too long) instead of being lost or crashing the
 * daemon; they go through as soon as storage takes writes again.
 */
import { InfraError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';

/** Runs `write` until it commits. Storage failures are retried with backoff (0.1 s doubling to 5 s); anything else is thrown. */
export async function untilStored<T>(write: () => Promise<T>, o: { log: () => Logger; what: string; stopped: () => boolean }): Promise<T> {
  for (let delay = 100; ; delay = Math.min(delay * 2, 5000)) {
    try {
      return await write();
    } catch (err) {
      if (!(err instanceof InfraError) || o.stopped()) throw err;
      o.log().error({ err }, `storage failing; retrying ${o.what} in ${delay} ms`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
