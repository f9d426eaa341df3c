/**
 * The subscribing client (`--follow`): tRPC subscriptions over WebSocket on the daemon's socket, queries
 * and mutations over HTTP. A separate module so that commands without --follow never load `ws`.
 */
import { createTRPCClient, createWSClient, splitLink, wsLink } from '@trpc/client';
import WebSocket from 'ws';
import type { AppRouter } from '../daemon/router.js';
import { unixSocketLink, type Connection } from './client.js';

/** A client that can also subscribe; `close()` must be called or the process stays alive. */
export function connectWithSubscriptions(socketPath: string, onReconnecting?: () => void): Connection {
  const ws = createWSClient({
    url: `ws+unix://${socketPath}:/`,
    WebSocket: WebSocket as unknown as typeof globalThis.WebSocket,
    retryDelayMs: (attempt) => Math.min(100 * 2 ** attempt, 2000),
    ...(onReconnecting ? { onClose: () => onReconnecting() } : {}),
  });
  const client = createTRPCClient<AppRouter>({
    links: [
      splitLink({
        condition: (op) => op.type === 'subscription',
        true: wsLink({ client: ws }),
        false: unixSocketLink(socketPath),
      }),
    ],
  });
  return { client, close: () => void ws.close() };
}
