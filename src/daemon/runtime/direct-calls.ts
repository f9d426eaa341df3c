/**
 * One tRPC query or mutation over HTTP, answered without tRPC's fetch adapter. The standalone adapter
 * turns every Node request into a WHATWG `Request`, an `AbortSignal` and a `Response` before and after
 * the procedure runs — about a third of a durable ack's CPU. This path reads the Node request as it is,
 * calls the procedure through tRPC itself (`callTRPCProcedure`: the same middleware, input validation
 * and error formatter) and writes tRPC's wire format: `{"result":{"data":…}}`, or `{"error":shape}` with
 * the status tRPC gives that error.
 *
 * It takes only the plain case — one call (no batch), a known procedure of the right method, a JSON
 * body of declared length (already checked against its limit by the server) — and hands anything else
 * to tRPC's own handler, which answers (or refuses) it exactly as before. Subscriptions stay on the
 * WebSocket.
 */
import type http from 'node:http';
import { callTRPCProcedure, getTRPCErrorFromUnknown, getTRPCErrorShape, TRPCError, type AnyTRPCRouter } from '@trpc/server';
import { getHTTPStatusCodeFromError } from '@trpc/server/http';

type NodeHandler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

interface ProcedureDef {
  _def: { type: 'query' | 'mutation' | 'subscription' };
}

/**
 * A request handler for `router` with a fixed context. `fallback` (tRPC's own handler) gets every
 * request this path does not take.
 */
export function directCallHandler(router: AnyTRPCRouter, ctx: unknown, fallback: NodeHandler): NodeHandler {
  const procedures = router._def.procedures as Record<string, ProcedureDef | undefined>;
  const config = router._def._config;

  function answer(res: http.ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  async function call(res: http.ServerResponse, path: string, type: 'query' | 'mutation', input: () => unknown): Promise<void> {
    let raw: unknown;
    try {
      raw = input();
      const data = await callTRPCProcedure({ router, path, getRawInput: async () => raw, ctx, type, signal: undefined, batchIndex: 0 });
      answer(res, 200, { result: data === undefined ? {} : { data } });
    } catch (cause) {
      const error = getTRPCErrorFromUnknown(cause);
      const shape = getTRPCErrorShape({ config, error, type, path, input: raw, ctx });
      answer(res, getHTTPStatusCodeFromError(error), { error: shape });
    }
  }

  return (req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = url.slice(1, q < 0 ? undefined : q);
    const proc = Object.hasOwn(procedures, path) ? procedures[path] : undefined;
    const type = proc?._def.type;
    if (type === 'query' && req.method === 'GET') {
      const params = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
      // Anything besides `input` (a batch, a connection parameter) is tRPC's to read.
      if ([...params.keys()].some((k) => k !== 'input')) return fallback(req, res);
      const text = params.get('input');
      void call(res, path, type, () => (text === null ? undefined : parseInput(text)));
      return;
    }
    const length = Number(req.headers['content-length']);
    if (type === 'mutation' && req.method === 'POST' && q < 0 && isJson(req.headers['content-type']) && Number.isInteger(length)) {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.once('end', () => void call(res, path, type, () => (length === 0 ? undefined : parseInput(Buffer.concat(chunks).toString('utf8')))));
      return;
    }
    fallback(req, res);
  };
}

function isJson(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.split(';')[0]!.trim().toLowerCase() === 'application/json';
}

function parseInput(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (cause) {
    // What tRPC's own handler answers for input that is not JSON.
    throw new TRPCError({ code: 'BAD_REQUEST', message: (cause as Error).message, cause });
  }
}
