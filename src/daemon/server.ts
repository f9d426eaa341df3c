/**
 * The API server: one HTTP server on the Unix socket serving tRPC over HTTP, with a WebSocket server
 * attached for subscriptions. The socket is created 0600 inside the 0700 home, so only its owner can
 * talk to the daemon. Timeouts, a connection cap and body limits (server-limits.ts) keep a slow or
 * silent client from holding the daemon.
 */
import { chmodSync, existsSync, unlinkSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { createHTTPHandler } from '@trpc/server/adapters/standalone';
import { applyWSSHandler } from '@trpc/server/adapters/ws';
import { WebSocketServer } from 'ws';
import { appRouter, type RouterContext } from './router.js';
import { directCallHandler } from './runtime/direct-calls.js';
import { DEFAULT_SERVER_LIMITS, limitConnections, refuseOversizedBody, serverOptions, type ServerLimits } from './runtime/server-limits.js';

/** Procedures that take a whole file in their body: they get `maxImportBytes` instead of `maxBodyBytes`. */
const IMPORT_PATHS = new Set(['project.import', 'ledger.import']);

/** The body limit of a tRPC request path (`/a.b`, or `/a,b` for a batch: every call must be an import). */
function bodyLimitOf(url: string | undefined, limits: ServerLimits): { bytes: number; setting: string } {
  const path = (url ?? '/').split('?')[0]!.slice(1);
  return path.split(',').every((p) => IMPORT_PATHS.has(p))
    ? { bytes: limits.maxImportBytes, setting: 'api.max_import_bytes' }
    : { bytes: limits.maxBodyBytes, setting: 'api.max_body_bytes' };
}

/** A refusal in tRPC's error shape, so every client reads it like any other (the CLI exits 2). */
function tooLargeError(message: string) {
  return {
    error: { message, code: -32413, data: { code: 'PAYLOAD_TOO_LARGE', httpStatus: 413, combine: { kind: 'BAD_REQUEST', code: 'PAYLOAD_TOO_LARGE' } } },
  };
}

/** True if something answers on the socket; false for no file or a stale file (ECONNREFUSED). */
export function isSocketLive(path: string, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    if (!existsSync(path)) return resolve(false);
    const sock = net.connect(path);
    const done = (live: boolean) => {
      sock.destroy();
      resolve(live);
    };
    sock.setTimeout(timeoutMs, () => done(true)); // accepted but slow: someone is there
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

export interface ApiServer {
  close(): Promise<void>;
}

export async function startApiServer(socketPath: string, context: RouterContext, limits: ServerLimits = DEFAULT_SERVER_LIMITS): Promise<ApiServer> {
  const createContext = () => context;
  const handlers = new Map(
    [limits.maxBodyBytes, limits.maxImportBytes].map((max) => [
      max,
      directCallHandler(appRouter, context, createHTTPHandler({ router: appRouter, createContext, maxBodySize: max })),
    ]),
  );
  const server = http.createServer(serverOptions(limits), (req, res) => {
    const limit = bodyLimitOf(req.url, limits);
    if (refuseOversizedBody(req, res, limit, tooLargeError)) return;
    void handlers.get(limit.bytes)!(req, res);
  });
  limitConnections(server, limits);
  // A subscription's messages are small: a client cannot make the daemon buffer ws's default 100 MiB.
  const wss = new WebSocketServer({ server, maxPayload: limits.maxBodyBytes });
  const wsHandler = applyWSSHandler({ wss, router: appRouter, createContext });

  // A socket file left by a killed daemon makes listen() fail with EADDRINUSE: replace it if stale.
  if (existsSync(socketPath)) {
    if (await isSocketLive(socketPath)) throw new Error(`another daemon is answering on ${socketPath}`);
    unlinkSync(socketPath);
  }
  let previousUmask: number | null = null;
  try {
    previousUmask = process.umask(0o177);
  } catch {
    // process.umask() is unavailable in worker threads; the chmod below still applies.
  }
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } finally {
    if (previousUmask !== null) process.umask(previousUmask);
  }
  chmodSync(socketPath, 0o600);

  return {
    /** Stops accepting; answers in progress (such as the stop command's own) finish first, up to 1 s. */
    async close() {
      wsHandler.broadcastReconnectNotification();
      for (const client of wss.clients) client.close();
      wss.close();
      server.closeIdleConnections();
      const force = setTimeout(() => server.closeAllConnections(), 1000);
      await new Promise<void>((resolve) => server.close(() => resolve()));
      clearTimeout(force);
    },
  };
}
