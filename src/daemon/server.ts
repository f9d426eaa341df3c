/**
 * The API server: one HTTP server on the Unix socket serving tRPC over HTTP, with a WebSocket server
 * attached for subscriptions. The socket is created 0600 inside the 0700 home, so only its owner can
 * talk to the daemon.
 */
import { chmodSync, existsSync, unlinkSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { createHTTPHandler } from '@trpc/server/adapters/standalone';
import { applyWSSHandler } from '@trpc/server/adapters/ws';
import { WebSocketServer } from 'ws';
import { appRouter, type RouterContext } from './router.js';

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

export async function startApiServer(socketPath: string, context: RouterContext): Promise<ApiServer> {
  const createContext = () => context;
  const server = http.createServer(createHTTPHandler({ router: appRouter, createContext }));
  const wss = new WebSocketServer({ server });
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
