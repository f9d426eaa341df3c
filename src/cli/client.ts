/**
 * The tRPC client for the daemon's Unix socket: queries and mutations over HTTP (a small fetch that
 * speaks to the socket, ~0.4 ms per call), subscriptions over WebSocket on the same socket. Every call
 * has a deadline, and a down daemon is detected by probing the socket first, never by a hanging call.
 * The WebSocket side lives in subscriptions.ts, loaded only by `--follow`: most commands never pay for
 * loading `ws`.
 */
import http from 'node:http';
import net from 'node:net';
import { existsSync } from 'node:fs';
import { createTRPCClient, httpLink, TRPCClientError } from '@trpc/client';
import type { AppRouter } from '../daemon/router.js';
import { CliError, EXIT } from './output.js';

export type DaemonClient = ReturnType<typeof createTRPCClient<AppRouter>>;

/** Resolves true if the daemon accepts a connection on the socket (a stale file refuses it). */
export function probeSocket(path: string, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    if (!existsSync(path)) return resolve(false);
    const sock = net.connect(path);
    const timer = setTimeout(() => finish(false), timeoutMs);
    function finish(up: boolean) {
      clearTimeout(timer);
      sock.destroy();
      resolve(up);
    }
    sock.once('connect', () => finish(true));
    sock.once('error', () => finish(false));
  });
}

/** A fetch for tRPC's httpLink that sends the request over a Unix socket. */
export function unixSocketFetch(socketPath: string): typeof fetch {
  return ((input: string | URL | Request, init?: RequestInit) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(String(input));
      const req = http.request(
        {
          socketPath,
          path: url.pathname + url.search,
          method: init?.method ?? 'GET',
          headers: init?.headers as http.OutgoingHttpHeaders,
          signal: init?.signal ?? undefined,
          // No keep-alive: a pooled socket would hold the CLI process open after its last call.
          agent: false,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const headers = new Headers();
            for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
            resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 500, headers }));
          });
        },
      );
      req.on('error', reject);
      req.end(typeof init?.body === 'string' ? init.body : undefined);
    })) as typeof fetch;
}

export interface Connection {
  client: DaemonClient;
  close(): void;
}

/** A client for queries and mutations only (no WebSocket is opened). */
export function connectHttp(socketPath: string): Connection {
  const client = createTRPCClient<AppRouter>({
    links: [httpLink({ url: 'http://combine.local/', fetch: unixSocketFetch(socketPath) })],
  });
  return { client, close() {} };
}

/** Turns a failed call into the CLI's error: exit 2 for bad input, 1 for refused operations, 3 for no daemon. */
export function toCliError(err: unknown): CliError {
  if (err instanceof CliError) return err;
  if (err instanceof TRPCClientError) {
    const data = err.data as { code?: string; combine?: { kind?: string; code?: string | null } | null } | undefined;
    const kind = data?.combine?.kind ?? data?.code;
    if (kind === 'BAD_REQUEST' || kind === 'NOT_FOUND' || kind === 'PARSE_ERROR') return new CliError(readableZodMessage(err.message), EXIT.USAGE);
    if (kind === 'CONFLICT') return new CliError(err.message, EXIT.FAILED);
    if (data === undefined) return unreachable(err.cause ?? err);
    return new CliError(`the daemon failed: ${err.message}`, EXIT.FAILED);
  }
  return unreachable(err);
}

function unreachable(err: unknown): CliError {
  const e = err as { name?: string; code?: string; message?: string };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') {
    return new CliError('the combine daemon did not answer in time (see `combine daemon status` and daemon.log)', EXIT.UNREACHABLE);
  }
  return new CliError(`cannot reach the combine daemon: ${e?.message ?? String(err)}`, EXIT.UNREACHABLE);
}

/** tRPC reports input errors as a JSON list of zod issues; show them as lines naming each field. */
function readableZodMessage(message: string): string {
  try {
    const issues = JSON.parse(message) as { path: (string | number)[]; message: string }[];
    if (Array.isArray(issues)) return issues.map((i) => `${i.path.join('.') || '(input)'}: ${i.message}`).join('\n');
  } catch {
    // not a zod list: already a sentence
  }
  return message;
}
