/**
 * A route of the JSON API: method, path template (OpenAPI's `{name}` syntax), the zod schemas that
 * validate its path, query and body, the schema of its answer, and a handler that calls a service — the
 * same functions the tRPC router calls, so the HTTP API and the CLI's `--json` give the same answers.
 * `/openapi.json` is generated from this table.
 */
import type { IncomingMessage } from 'node:http';
import type { z } from 'zod';
import type { Services } from '../services/index.js';
import { badInput } from './problem.js';
import { DEFAULT_SERVER_LIMITS, dropRestOfBody } from '../runtime/server-limits.js';
import { HttpProblem } from '../../core/errors.js';
import { findUnstorableText, NUL_REFUSED } from '../../domain/storable-text.js';

type AnyObject = z.ZodObject<z.ZodRawShape>;

export interface RouteInput<P extends AnyObject, Q extends AnyObject, B extends z.ZodType> {
  params: z.output<P>;
  query: z.output<Q>;
  body: z.output<B>;
  services: Services;
  /** The request's `traceparent` header (W3C Trace Context), if any: a command joins that trace. */
  traceparent: string | null;
}

export interface Route<P extends AnyObject = AnyObject, Q extends AnyObject = AnyObject, B extends z.ZodType = z.ZodType> {
  method: 'GET' | 'POST';
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  params?: P;
  query?: Q;
  /** A POST's JSON body; absent: the body must be empty or `{}`. */
  body?: B;
  /**
   * The body's `input` is the input of the operation the path's `{operation}` names, checked by that
   * operation's JSON Schema: /openapi.json documents it with each loaded operation's schema.
   */
  inputOfOperation?: boolean;
  status: 200 | 202;
  response: z.ZodType;
  /** Another status for some answers (health: 503 while unready), documented with the same schema. */
  otherStatus?: { status: number; description: string; when: (result: any) => boolean };
  /** Extra answer headers (a 202's Location, a page's Link to the next one). */
  headers?: (result: any, input: RouteInput<P, Q, B>) => Record<string, string>;
  handle(input: RouteInput<P, Q, B>): unknown;
}

/** Declares a route with its handler typed by its schemas. */
export function route<P extends AnyObject, Q extends AnyObject, B extends z.ZodType>(r: Route<P, Q, B>): Route {
  return r as unknown as Route;
}

/** `/threads/{thread_id}/ledger` → a matcher returning the decoded path values, or null. */
export function compilePath(template: string): (path: string) => Record<string, string> | null {
  const names: string[] = [];
  const pattern = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{(\w+)\}/g, (_, name: string) => {
    names.push(name);
    return '([^/]+)';
  });
  const re = new RegExp(`^${pattern}$`);
  return (path) => {
    const m = re.exec(path);
    if (!m) return null;
    const out: Record<string, string> = {};
    try {
      names.forEach((n, i) => {
        out[n] = decodeURIComponent(m[i + 1]!);
      });
    } catch {
      return null; // a malformed %-escape matches nothing
    }
    return out;
  };
}

/** Query string → object; a key given twice is refused (lists are comma-separated). */
export function queryObject(search: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of search) {
    if (k in out)
      throw new HttpProblem(400, 'BAD_REQUEST', `invalid query: ${k}: given twice (separate several values with commas)`, [
        { field: k, message: 'given twice' },
      ]);
    out[k] = v;
  }
  return out;
}

export function parseWith<S extends z.ZodType>(where: string, schema: S, value: unknown): z.output<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw badInput(where, r.error);
  return r.data;
}

/** Body size limit of the JSON API: the API socket's (server-limits.ts). */
export const MAX_BODY_BYTES = DEFAULT_SERVER_LIMITS.maxBodyBytes;

/** Reads a JSON body of at most MAX_BODY_BYTES (413 beyond, announced or not); undefined when empty. */
export async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const tooLarge = () => new HttpProblem(413, 'PAYLOAD_TOO_LARGE', `the body is over the limit of ${MAX_BODY_BYTES} bytes (1 MiB)`);
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY_BYTES) {
    await dropRestOfBody(req);
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  // Listeners, not `for await`: leaving a for-await early destroys the request and its socket before the
  // 413 is written, and a client still sending then sees a reset instead of the answer. The 413 is thrown
  // once the rest of the body has been dropped (dropRestOfBody), for the same reason.
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) return void chunks.push(chunk);
      req.off('data', onData);
      req.off('end', resolve);
      void dropRestOfBody(req).then(() => reject(tooLarge()));
    };
    req.on('data', onData);
    req.once('end', resolve);
    req.once('error', reject);
  });
  if (size === 0) return undefined;
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') {
    throw new HttpProblem(415, 'UNSUPPORTED_MEDIA_TYPE', `the body must be application/json (got "${type || 'no content type'}")`);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw new HttpProblem(400, 'BAD_REQUEST', `invalid body: not JSON (${(err as Error).message})`, [{ field: 'body', message: 'not JSON' }]);
  }
  const unstorable = findUnstorableText(body);
  if (unstorable !== null) throw textProblemAt('body', unstorable.path === '(root)' ? 'body' : unstorable.path, unstorable.problem);
  return body;
}

/**
 * A request's values holding U+0000 are refused with a 400 naming the field, before any route or page
 * reads them (domain/storable-text.ts): the path's and query's decoded values here, the body as it is read
 * (which refuses a lone surrogate too: a URL's percent-decoding never makes one, it makes U+FFFD or fails).
 */
export function refuseNulInUrl(url: URL): void {
  // `%00` is how a path carries a NUL: routes decode their path values (compilePath).
  if (url.pathname.includes('%00')) throw textProblemAt('path', 'path', NUL_REFUSED);
  for (const [k, v] of url.searchParams) {
    if (k.includes('\0') || v.includes('\0')) throw textProblemAt('query', k.includes('\0') ? 'query' : k, NUL_REFUSED);
  }
}

function textProblemAt(where: string, field: string, problem: string): HttpProblem {
  return new HttpProblem(400, 'BAD_REQUEST', `invalid ${where}: ${field}: ${problem}`, [{ field, message: problem }]);
}
