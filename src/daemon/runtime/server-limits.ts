/**
 * Limits for an HTTP server the daemon runs (the API on the Unix socket; any HTTP port reuses them), so
 * that no client — slow, silent or hostile — can hold the daemon's connections, memory or file
 * descriptors:
 *
 *   header timeout     a connection whose request headers are not all there in time — one that sends
 *                      nothing at all included — gets 408 and is closed
 *   request timeout    the same for the whole request, body included
 *   idle timeout       a kept-alive connection with no new request in this time is closed
 *   connection cap     over the cap, the oldest connection with no request in progress is closed to make
 *                      room; a new connection is refused only when every one is busy
 *   body limit         a request body over the limit is refused (413) before any of it is kept
 */
import type http from 'node:http';
import type { Socket } from 'node:net';

export interface ServerLimits {
  maxConnections: number;
  headerTimeoutMs: number;
  requestTimeoutMs: number;
  idleTimeoutMs: number;
  /** Request bodies, except the paths `largeBodyPaths` names. */
  maxBodyBytes: number;
  /** Request bodies of bulk imports (a project file, a ledger export). */
  maxImportBytes: number;
}

const MiB = 2 ** 20;

export const DEFAULT_SERVER_LIMITS: ServerLimits = {
  maxConnections: 512,
  headerTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  idleTimeoutMs: 5_000,
  maxBodyBytes: MiB,
  maxImportBytes: 64 * MiB,
};

/** Options for `http.createServer`: Node's own timeouts, checked often enough to matter. */
export function serverOptions(limits: ServerLimits): http.ServerOptions {
  return {
    headersTimeout: limits.headerTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.idleTimeoutMs,
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(limits.headerTimeoutMs / 2))),
  };
}

/** Tracks connections and enforces the connection cap on `server`. */
export function limitConnections(server: http.Server, limits: ServerLimits): void {
  // Insertion order is age order: the first idle one found is the oldest.
  const open = new Set<Socket>();
  const busy = new Map<Socket, number>();
  const isIdle = (s: Socket) => !busy.has(s);

  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => {
      open.delete(socket);
      busy.delete(socket);
    });
    if (open.size <= limits.maxConnections) return;
    for (const s of open) {
      if (s !== socket && isIdle(s)) {
        s.destroy();
        return;
      }
    }
    socket.destroy(); // every other connection is in the middle of a request
  });
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const s = req.socket;
    busy.set(s, (busy.get(s) ?? 0) + 1);
    res.once('close', () => {
      const n = (busy.get(s) ?? 1) - 1;
      if (n > 0) busy.set(s, n);
      else busy.delete(s);
    });
  });
  // A WebSocket (a `--follow`) is a long-lived, legitimately quiet connection: never evicted.
  server.on('upgrade', (req: http.IncomingMessage) => busy.set(req.socket, Number.POSITIVE_INFINITY));
}

/**
 * Refuses a request whose declared body is over `limit` with 413 before any of the body is kept.
 * Returns true when it refused. Bodies without a length are limited while they are read
 * (the tRPC handler's `maxBodySize`).
 */
export function refuseOversizedBody(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  limit: { bytes: number; setting: string },
  body: (message: string) => unknown,
): boolean {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (!(declared > limit.bytes)) return false;
  const message = `the request body is ${formatBytes(declared)}, over the ${formatBytes(limit.bytes)} limit of this endpoint (${limit.setting}); nothing was stored`;
  const text = JSON.stringify(body(message));
  void dropRestOfBody(req).then(() => {
    res.writeHead(413, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });
  return true;
}

/**
 * Lingering close after a refused body: the rest of it is read and dropped (never kept) until it ends or LINGER_MS
 * have passed; the answer is to be written then. Written at once, the server would close the connection after the
 * 413 with the client's bytes still unread, the kernel would answer them with a reset, and a client still writing
 * would lose the answer it had not read yet (seen in CI under load: "the connection closed with no answer").
 */
export function dropRestOfBody(req: http.IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    // Once, whichever comes first; the socket's listener removed, as a kept-alive socket outlives its requests.
    const done = () => {
      clearTimeout(linger);
      req.off('end', done);
      req.socket.off('close', done);
      resolve();
    };
    const linger = setTimeout(done, LINGER_MS);
    linger.unref();
    req.once('end', done);
    req.socket.once('close', done);
    req.resume();
  });
}

/** How long the rest of a refused body is read and dropped at most before the 413 is written (and, on the HTTP API, the connection closed). */
const LINGER_MS = 5_000;

export function formatBytes(n: number): string {
  if (n >= MiB) return `${Number((n / MiB).toFixed(1))} MiB`;
  if (n >= 1024) return `${Number((n / 1024).toFixed(1))} KiB`;
  return `${n} bytes`;
}
