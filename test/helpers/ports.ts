/**
 * Loopback ports for tests that need a port nothing listens on yet: for a server another process will
 * open (a daemon's metrics port, a Postgres server) or for a call that must be refused.
 *
 * Why not `listen(0)` then close: the port it returns comes from the kernel's ephemeral range (Linux:
 * 32768–60999), the range every other `listen(0)` and every outgoing connection of the suite's parallel
 * files draws from, so the port handed back can be handed out again before this test uses it (a refused
 * call then reached another file's simulator). A port below that range is only ever taken on request.
 */
import { createServer } from 'node:net';

const LOW = 20_000;
const SPAN = 10_000;

/** A port below the ephemeral range that was free when this returned (bound and closed again). */
export async function unusedPort(): Promise<number> {
  for (;;) {
    const port = LOW + Math.floor(Math.random() * SPAN);
    const srv = createServer();
    const bound = await new Promise<boolean>((resolve) => {
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (!bound) continue;
    await new Promise<void>((resolve) => srv.close(() => resolve()));
    return port;
  }
}
