/**
 * Every HTTP error is an `application/problem+json` answer (RFC 9457), classified here and nowhere
 * else: a refused command (`CommandError`) keeps the CLI's code (BAD_REQUEST 400, NOT_FOUND 404,
 * CONFLICT 409, QUEUE_FULL 503 with Retry-After), a request that fails its schema is a 400 naming each
 * field, and anything else is a 500 whose cause goes to the log, not to the client.
 */
import { STATUS_CODES } from 'node:http';
import type { z } from 'zod';
import { CommandError } from '../../core/errors.js';
import { type FieldError, HttpProblem } from '../../core/errors.js';

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  errors?: FieldError[];
}

/** How long a client refused for a full queue should wait before trying again. */
const QUEUE_FULL_RETRY_AFTER_S = 5;

/** A schema failure as a 400: `where` is the part of the request (body, query, path). */
export function badInput(where: string, error: z.ZodError): HttpProblem {
  const errors = error.issues.map((i) => {
    // An unknown key is reported on its parent object: name the key itself.
    const keys = i.code === 'unrecognized_keys' ? i.keys : [null];
    return keys.map((k) => ({
      field: [...i.path, ...(k === null ? [] : [k])].join('.') || where,
      message: i.code === 'unrecognized_keys' ? 'unknown field' : i.message,
    }));
  });
  const flat = errors.flat();
  return new HttpProblem(400, 'BAD_REQUEST', `invalid ${where}: ${flat.map((e) => `${e.field}: ${e.message}`).join('; ')}`, flat);
}

function classify(err: unknown): HttpProblem | null {
  if (err instanceof HttpProblem) return err;
  if (err instanceof CommandError) {
    // Refusals that pass: the client should retry later (a full queue, or a WAL waiting for its checkpoint).
    if (err.code === 'QUEUE_FULL' || err.code === 'BACKPRESSURE')
      return new HttpProblem(503, err.code, err.message, undefined, { 'retry-after': String(QUEUE_FULL_RETRY_AFTER_S) });
    const status = err.kind === 'BAD_REQUEST' ? 400 : err.kind === 'NOT_FOUND' ? 404 : 409;
    return new HttpProblem(status, err.code ?? err.kind, err.message, err.fields ? [...err.fields] : undefined);
  }
  return null;
}

/** The problem document and headers for any error; `unexpected` is called for a 500's cause. */
export function toProblem(err: unknown, unexpected: (err: unknown) => void): { problem: Problem; headers: Record<string, string> } {
  let p = classify(err);
  if (!p) {
    unexpected(err);
    p = new HttpProblem(500, 'INTERNAL', 'the daemon failed to answer this request; the cause is in daemon.log');
  }
  const problem: Problem = { type: 'about:blank', title: STATUS_CODES[p.status] ?? 'Error', status: p.status, detail: p.message, code: p.code };
  if (p.errors) problem.errors = p.errors;
  return { problem, headers: p.headers };
}
