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

/** A port below the ephemeral range that was free when this returned (bound and closed again); tries 50 ports, only past EADDRINUSE. */
export async function unusedPort(): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const port = LOW + Math.floor(Math.random() * SPAN);
    const srv = createServer();
    const failure = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
      srv.once('error', resolve);
      srv.listen(port, '127.0.0.1', () => resolve(null));
    });
    if (failure === null) {
      await new Promise<void>((resolve) => srv.close(() => resolve()));
      return port;
    }
    if (failure.code !== 'EADDRINUSE' || attempt >= 50) throw failure;
  }
}
