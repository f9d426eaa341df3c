/**
 * The one classification boundary: every failure of a provider call becomes an error code and a class
 * (design.md "Failure semantics"). Anything not recognised is transient, so it is retried up to the
 * attempt limit rather than silently dropped or retried forever.
 */
import OpenAI from 'openai';
import { redactSecrets, type ClassifiedError } from '../../domain/errors.js';
import { parseResetDuration } from '../../domain/rate-limit.js';
import { parseRetryAfterMs } from '../../domain/retry.js';
import { MissingApiKeyError } from '../provider.js';

export interface AbortState {
  /** The user canceled the thread. */
  canceled: boolean;
  /** Our own call deadline fired. */
  timedOut: boolean;
}

/** Classifies a failed call. `secrets` (the API key) are scrubbed from every message kept. */
export function classifyCallError(err: unknown, aborts: AbortState, now: number, secrets: readonly string[] = []): ClassifiedError {
  const message = redactSecrets((err as Error)?.message ?? String(err), secrets);
  if (aborts.canceled) return { code: 'CANCELED', class: 'canceled', message: 'canceled by the user' };
  if (aborts.timedOut || err instanceof OpenAI.APIConnectionTimeoutError) {
    return { code: 'PROVIDER_TIMEOUT', class: 'transient', message: `the provider did not answer in time: ${message}` };
  }
  if (err instanceof MissingApiKeyError) return { code: 'PROVIDER_AUTH', class: 'permanent', message, notSent: true };
  if (err instanceof OpenAI.APIUserAbortError) {
    return { code: 'INTERRUPTED', class: 'transient', message: 'the call was aborted' };
  }
  if (err instanceof OpenAI.APIConnectionError) {
    return {
      code: 'PROVIDER_ERROR',
      class: 'transient',
      message: `cannot reach the provider: ${message}`,
      ...(neverConnected(err) ? { notSent: true } : {}),
    };
  }
  if (err instanceof OpenAI.APIError && typeof err.status === 'number') {
    const status = err.status;
    const headers = err.headers;
    if (status === 429) {
      // Without Retry-After, the rate-limit reset headers say when the window reopens.
      const retryAfterMs =
        parseRetryAfterMs(headers?.get('retry-after'), headers?.get('retry-after-ms'), now) ?? rateLimitResetMs(headers);
      return {
        code: 'PROVIDER_RATE_LIMIT',
        class: 'transient',
        message,
        httpStatus: status,
        ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      };
    }
    if (status === 401 || status === 403) return { code: 'PROVIDER_AUTH', class: 'permanent', message, httpStatus: status };
    if (status === 408 || status === 409 || status >= 500) {
      const retryAfterMs = parseRetryAfterMs(headers?.get('retry-after'), headers?.get('retry-after-ms'), now);
      return {
        code: 'PROVIDER_ERROR',
        class: 'transient',
        message,
        httpStatus: status,
        ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      };
    }
    // 400, 404, 422 …: the request itself is wrong; sending it again cannot help.
    return { code: 'PROVIDER_ERROR', class: 'permanent', message, httpStatus: status };
  }
  return { code: 'UNKNOWN', class: 'transient', message };
}

/** Connection errors where the request provably never left: refused, or the host did not resolve. */
function neverConnected(err: unknown): boolean {
  for (let e: any = err, depth = 0; e && depth < 5; e = e.cause, depth++) {
    if (['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN'].includes(e.code)) return true;
  }
  return false;
}

/** The longer of the requests/tokens reset durations of a 429, if the provider sent them. */
function rateLimitResetMs(headers: Headers | undefined): number | undefined {
  if (!headers) return undefined;
  const resets = [headers.get('x-ratelimit-reset-requests'), headers.get('x-ratelimit-reset-tokens')]
    .map((v) => parseResetDuration(v))
    .filter((v): v is number => v !== null);
  return resets.length > 0 ? Math.max(...resets) : undefined;
}
