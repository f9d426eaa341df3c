/**
 * The one classification boundary: every failure of a provider call becomes an error code and a class
 * (design.md "Failure semantics"). Anything not recognised is transient, so it is retried up to the
 * attempt limit rather than silently dropped or retried forever.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai/error';
import { redactSecrets, type ClassifiedError } from '../../domain/errors.js';
import { storableMessage } from '../../domain/storable-text.js';
import { parseResetDuration } from '../../domain/rate-limit.js';
import { parseRetryAfterMs } from '../../domain/retry.js';
import { AnswerTooLargeError, MissingApiKeyError } from '../../core/errors.js';

export interface AbortState {
  /** The user canceled the thread. */
  canceled: boolean;
  /** Our own call deadline fired. */
  timedOut: boolean;
}

export interface ClassifyOptions {
  /** Credentials scrubbed from every message kept. */
  secrets?: readonly string[];
  /** Provider-requested waits longer than this are cut to it (config `retry.max_provider_wait`). */
  maxProviderWaitMs?: number;
}

/** Classifies a failed call. */
export function classifyCallError(err: unknown, aborts: AbortState, now: number, o: ClassifyOptions = {}): ClassifiedError {
  const message = keptText((err as Error)?.message ?? String(err), o.secrets);
  if (aborts.canceled) return { code: 'CANCELED', class: 'canceled', message: 'canceled by the user' };
  if (aborts.timedOut || err instanceof APIConnectionTimeoutError) {
    return { code: 'PROVIDER_TIMEOUT', class: 'transient', message: `the provider did not answer in time: ${message}` };
  }
  if (err instanceof MissingApiKeyError) return { code: 'PROVIDER_AUTH', class: 'permanent', message, notSent: true };
  // A 2xx answer was paid for but is not kept: asking again would most likely get the same.
  if (err instanceof AnswerTooLargeError) return { code: 'PROVIDER_ERROR', class: 'permanent', message };
  if (err instanceof APIUserAbortError) {
    return { code: 'INTERRUPTED', class: 'transient', message: 'the call was aborted' };
  }
  if (err instanceof APIConnectionError) {
    if (neverConnected(err)) {
      return {
        code: 'PROVIDER_ERROR',
        class: 'transient',
        message: `cannot reach the provider (nothing was sent): ${describeCause(err, o.secrets)}`,
        notSent: true,
      };
    }
    const dropped = connectionDropped(err);
    return {
      code: 'PROVIDER_ERROR',
      class: 'transient',
      message: dropped ? `the connection dropped before the provider answered: ${describeCause(err, o.secrets)}` : `cannot reach the provider: ${message}`,
    };
  }
  if (err instanceof APIError && typeof err.status === 'number') return classifyHttpError(err, err.status, message, now, o);
  // The answer's headers came, then the connection broke while its body was read (undici: "terminated").
  if (connectionDropped(err)) {
    return {
      code: 'PROVIDER_ERROR',
      class: 'transient',
      message: `the connection dropped while the answer was being received: ${describeCause(err, o.secrets)}`,
    };
  }
  return { code: 'UNKNOWN', class: 'transient', message };
}

function classifyHttpError(err: APIError, status: number, message: string, now: number, o: ClassifyOptions): ClassifiedError {
  const headers = err.headers;
  if (status === 429) {
    // Without Retry-After, the rate-limit reset headers say when the window reopens.
    const asked = parseRetryAfterMs(headers?.get('retry-after'), headers?.get('retry-after-ms'), now) ?? rateLimitResetMs(headers);
    return { code: 'PROVIDER_RATE_LIMIT', class: 'transient', message, httpStatus: status, ...providerWait(asked, o) };
  }
  if (status === 401 || status === 403) return { code: 'PROVIDER_AUTH', class: 'permanent', message, httpStatus: status };
  if (status === 408 || status === 409 || status >= 500) {
    const asked = parseRetryAfterMs(headers?.get('retry-after'), headers?.get('retry-after-ms'), now);
    return { code: 'PROVIDER_ERROR', class: 'transient', message, httpStatus: status, ...providerWait(asked, o) };
  }
  // 400, 404, 422 …: the request itself is wrong; sending it again cannot help.
  if (status === 400 && /json_schema|response_format|structured output/i.test(message)) {
    const hint =
      'the provider does not accept the JSON-schema response format: set provider.response_format to "json_object" (or "none") in config.json and restart the daemon; answers are still validated against the schema';
    return { code: 'PROVIDER_ERROR', class: 'permanent', message: `${hint} (provider said: ${message})`, httpStatus: status };
  }
  return { code: 'PROVIDER_ERROR', class: 'permanent', message, httpStatus: status };
}

/** A provider-requested wait, cut to the configured maximum; the provider's own value is kept when cut. */
function providerWait(askedMs: number | undefined, o: ClassifyOptions): Pick<ClassifiedError, 'retryAfterMs' | 'providerRetryAfterMs'> {
  if (askedMs === undefined) return {};
  const max = o.maxProviderWaitMs ?? Number.POSITIVE_INFINITY;
  return askedMs > max ? { retryAfterMs: max, providerRetryAfterMs: askedMs } : { retryAfterMs: askedMs };
}

/** The error codes of a chain of causes (an AggregateError's too: Happy Eyeballs tries every address). */
function causeCodes(err: unknown): { codes: string[]; messages: string[] } {
  const codes: string[] = [];
  const messages: string[] = [];
  const walk = (e: any, depth: number) => {
    if (!e || depth > 5) return;
    if (typeof e.code === 'string') codes.push(e.code);
    if (typeof e.message === 'string') messages.push(e.message);
    if (Array.isArray(e.errors)) for (const x of e.errors) walk(x, depth + 1);
    walk(e.cause, depth + 1);
  };
  walk(err, 0);
  return { codes, messages };
}

/**
 * The request provably never left: the connection was refused or could not be made, the host did not
 * resolve, or fetch refused the port itself ("bad port"). Nothing can have been billed.
 */
const NOT_SENT_CODES = ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT'];
function neverConnected(err: unknown): boolean {
  const { codes, messages } = causeCodes(err);
  return codes.some((c) => NOT_SENT_CODES.includes(c)) || messages.includes('bad port');
}

/** The connection was open and then broke (reset, closed by the other side): the request may have been processed. */
function connectionDropped(err: unknown): boolean {
  const { codes, messages } = causeCodes(err);
  return codes.some((c) => ['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED'].includes(c)) || messages.includes('terminated');
}

/** The innermost cause's message: "connect ECONNREFUSED 127.0.0.1:1", "other side closed". */
function describeCause(err: unknown, secrets: readonly string[] | undefined): string {
  const { messages } = causeCodes(err);
  return keptText(messages[messages.length - 1] ?? String(err), secrets);
}

/** A message from outside as it is kept: credentials redacted, a U+0000 written as `\u0000`, half a surrogate pair as U+FFFD (domain/storable-text.ts). */
function keptText(text: string, secrets: readonly string[] | undefined): string {
  return storableMessage(redactSecrets(text, secrets));
}

/** The longer of the requests/tokens reset durations of a 429, if the provider sent them. */
function rateLimitResetMs(headers: Headers | undefined): number | undefined {
  if (!headers) return undefined;
  const resets = [headers.get('x-ratelimit-reset-requests'), headers.get('x-ratelimit-reset-tokens')]
    .map((v) => parseResetDuration(v))
    .filter((v): v is number => v !== null);
  return resets.length > 0 ? Math.max(...resets) : undefined;
}
