/**
 * The tRPC client for the daemon's Unix socket: queries and mutations over HTTP (a small tRPC link on
 * node:http, ~0.4 ms per call), subscriptions over WebSocket on the same socket. Every call
 * has a deadline, and a down daemon is detected by probing the socket first, never by a hanging call.
 * The WebSocket side lives in subscriptions.ts, loaded only by `--follow`: most commands never pay for
 * loading `ws`.
 */
import http from 'node:http';
import net from 'node:net';
import { existsSync } from 'node:fs';
import { createTRPCClient, TRPCClientError, type TRPCLink } from '@trpc/client';
import { observable } from '@trpc/server/observable';
import type { AppRouter } from '../daemon/router.js';
import { EXIT } from './output.js';
import { CliError } from '../core/errors.js';

export type DaemonClient = ReturnType<typeof createTRPCClient<AppRouter>>;

/** Resolves true if the daemon accepts a connection on the socket (a stale file refuses it). */
export async function probeSocket(path: string, timeoutMs = 1000): Promise<boolean> {
  const sock = await openSocket(path, timeoutMs);
  sock?.destroy();
  return sock !== null;
}

/**
 * A connection the daemon accepted on the socket, or null if none within `timeoutMs` (no file, a stale
 * file, a refusal). connectDaemon hands it to the first call, so that finding the daemon up and asking
 * it something take one connection, not two.
 */
export function openSocket(path: string, timeoutMs = 1000): Promise<net.Socket | null> {
  return new Promise((resolve) => {
    if (!existsSync(path)) return resolve(null);
    const sock = net.connect(path);
    const timer = setTimeout(() => finish(false), timeoutMs);
    function finish(up: boolean) {
      clearTimeout(timer);
      if (up) return resolve(sock);
      sock.destroy();
      resolve(null);
    }
    sock.once('connect', () => finish(true));
    // Also an open socket's error while it waits for its call (the daemon went away): the call that takes
    // it then fails on a closed socket, as a call on a fresh connection would.
    sock.on('error', () => finish(false));
  });
}

/**
 * The tRPC link for queries and mutations: tRPC's HTTP protocol (GET `/path?input=…`, POST `/path` with
 * the input as JSON; the answer is `{result}` or `{error}`) over node:http on the Unix socket. Not
 * tRPC's `httpLink`: it reads the `FormData` global and needs a WHATWG `Response`, and either makes Node
 * load its bundled undici — about a fifth of a short command's run time. No transformer is configured,
 * so inputs and results travel as plain JSON.
 */
export function unixSocketLink(socketPath: string, takeOpened: () => net.Socket | null = () => null): TRPCLink<AppRouter> {
  return () =>
    ({ op }) =>
      observable((observer) => {
        if (op.type === 'subscription') {
          observer.error(new TRPCClientError('subscriptions need the WebSocket client (connectWithSubscriptions)'));
          return () => {};
        }
        const input = op.input === undefined ? undefined : JSON.stringify(op.input);
        const isMutation = op.type === 'mutation';
        let req: http.ClientRequest;
        // The connection the probe opened serves the first call; each later call opens its own. The daemon
        // may close that spare before the call reaches it (its header timeout, its connection cap): the call
        // is then sent again, once, on a connection of its own (neverRan says when that is safe).
        const send = (sock: net.Socket | null) => {
          const onSpare = sock !== null;
          // Once a call is sent again, what its first request still reports (the error after a 408) is ignored.
          const own: http.ClientRequest = http.request(
            {
              path: `/${op.path}${!isMutation && input !== undefined ? `?input=${encodeURIComponent(input)}` : ''}`,
              method: isMutation ? 'POST' : 'GET',
              headers: isMutation ? { 'content-type': 'application/json', 'content-length': input === undefined ? 0 : Buffer.byteLength(input) } : {},
              signal: op.signal ?? undefined,
              // Our own connection and no agent: no pooled socket holds the CLI process open after its
              // last call, and Node skips the agent's per-request host name work (~3 ms on a cold start).
              createConnection: () => sock ?? net.connect(socketPath),
            },
            (res) => {
              if (req !== own) return void res.resume();
              if (onSpare && res.statusCode === 408) {
                res.resume();
                return send(null);
              }
              const chunks: Buffer[] = [];
              res.on('data', (c: Buffer) => chunks.push(c));
              res.on('error', (err) => observer.error(TRPCClientError.from(err)));
              res.on('end', () => {
                let envelope: { result?: unknown; error?: unknown };
                try {
                  envelope = JSON.parse(Buffer.concat(chunks).toString('utf8'));
                } catch {
                  return observer.error(new TRPCClientError(`the daemon answered HTTP ${res.statusCode} with a body that is not JSON`));
                }
                if (envelope.error) return observer.error(TRPCClientError.from(envelope as Parameters<typeof TRPCClientError.from>[0]));
                observer.next({ result: envelope.result as { data: unknown } });
                observer.complete();
              });
            },
          );
          req = own;
          own.on('error', (err: NodeJS.ErrnoException) => {
            if (req !== own) return;
            if (onSpare && neverRan(err, isMutation)) return send(null);
            observer.error(TRPCClientError.from(err));
          });
          own.end(isMutation ? input : undefined);
        };
        send(takeOpened());
        return () => req.destroy();
      });
}

/**
 * Whether a call that failed on the spare connection without an answer can be sent again. EPIPE: the
 * daemon had closed the connection before the request was written, so it never read it. A reset or a
 * hang-up may come after the daemon read the request (a daemon killed while running it): only a query,
 * which changes nothing, is sent again then; a mutation fails as it would on any connection.
 */
function neverRan(err: NodeJS.ErrnoException, isMutation: boolean): boolean {
  if (err.name === 'AbortError') return false;
  if (err.code === 'EPIPE') return true;
  return !isMutation && (err.code === 'ECONNRESET' || err.code === 'ECONNABORTED');
}

export interface Connection {
  client: DaemonClient;
  close(): void;
}

/**
 * A client for queries and mutations only (no WebSocket is opened). `opened`: a connection already made
 * to the socket (openSocket), used by the first call; closed if no call used it.
 */
export function connectHttp(socketPath: string, opened: net.Socket | null = null): Connection {
  let spare = opened;
  const takeOpened = () => {
    const sock = spare;
    spare = null;
    // The daemon may have closed it while it waited (a restart, its header timeout, which first answers
    // 408): the call then opens its own. Anything the daemon sent before a request is such a goodbye.
    if (sock && (sock.destroyed || !sock.writable || sock.readableLength > 0 || sock.readableEnded)) {
      sock.destroy();
      return null;
    }
    return sock;
  };
  const client = createTRPCClient<AppRouter>({ links: [unixSocketLink(socketPath, takeOpened)] });
  // A taken connection belongs to its request, which closes it; one no call took is closed here.
  return { client, close: () => takeOpened()?.destroy() };
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
