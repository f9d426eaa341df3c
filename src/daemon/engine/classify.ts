/**
 * The one classification boundary: every failure of a provider call becomes an error code and a class
 * (design.md "Failure semantics"). Anything not recognised is transient, so it is retried up to the
 * attempt limit rather than silently dropped or retried forever.
 */
import OpenAI from 'openai';
import { redactSecrets, type ClassifiedError } from '../../domain/errors.js';
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
  if (err instanceof MissingApiKeyError) return { code: 'PROVIDER_AUTH', class: 'permanent', message };
  if (err instanceof OpenAI.APIUserAbortError) {
    return { code: 'INTERRUPTED', class: 'transient', message: 'the call was aborted' };
  }
  if (err instanceof OpenAI.APIConnectionError) {
    return { code: 'PROVIDER_ERROR', class: 'transient', message: `cannot reach the provider: ${message}` };
  }
  if (err instanceof OpenAI.APIError && typeof err.status === 'number') {
    const status = err.status;
    const headers = err.headers;
    if (status === 429) {
      const retryAfterMs = parseRetryAfterMs(headers?.get('retry-after'), headers?.get('retry-after-ms'), now);
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
