/**
 * Error codes (WS-ADR-035 plus ours) and the failure classes that decide what the engine does.
 * The mapping from a concrete error (an SDK exception, an SQLite code) to a code lives at one boundary
 * in the daemon (`daemon/engine/classify.ts`); this module only names them.
 */

export const ERROR_CODES = [
  'LOCKED',
  'PROVIDER_RATE_LIMIT',
  'PROVIDER_TIMEOUT',
  'PROVIDER_ERROR',
  'PROVIDER_AUTH',
  'SCHEMA_INVALID',
  'MUTATION_CONFLICT',
  'BUDGET_EXCEEDED',
  'INTERRUPTED',
  'CANCELED',
  'SKIPPED_DEADLINE',
  /** Replaced by a newer --force request for the same target before its call started (nothing was paid). */
  'SUPERSEDED',
  'QUEUE_FULL',
  'INFRA',
  /** Storage refused a value the item's write held (db/errors.ts `refusedValueOf`): permanent, never retried. */
  'VALUE_REFUSED',
  'UNKNOWN',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * transient: retry with backoff up to max_attempts. permanent: dead_letter at once.
 * infra: our own storage failed; bounded retries, health unready. canceled: stop, no retry.
 */
export type ErrorClass = 'transient' | 'permanent' | 'infra' | 'canceled';

/** A failure after classification: everything the engine needs to decide the next state. */
export interface ClassifiedError {
  code: ErrorCode;
  class: ErrorClass;
  message: string;
  /** A provider-imposed minimum delay (Retry-After, retry-after-ms, or the rate-limit reset headers), capped. */
  retryAfterMs?: number;
  /** What the provider asked for, when it was longer than the cap (`retry.max_provider_wait`). */
  providerRetryAfterMs?: number;
  /** The request certainly never reached the provider (no key, connection refused): nothing can have been billed. */
  notSent?: boolean;
  httpStatus?: number;
}

/**
 * Removes anything that looks like a credential from a message before it reaches a log or the ledger
 * (providers sometimes echo a masked key in 401 messages).
 */
export function redactSecrets(text: string, secrets: readonly string[] = []): string {
  return redactValues(text, secrets)
    .replace(/\b(sk|rk|pk|sess)-[A-Za-z0-9_*.-]{6,}/g, '[redacted]')
    .replace(/(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi, '$1[redacted]');
}

/** Secrets shorter than this are not redacted: they would match ordinary text. */
export const MIN_SECRET_LENGTH = 8;

/**
 * Replaces every occurrence of each secret in `text` — as is, and as it reads inside a JSON string —
 * with `[redacted]`. Only exact values: recorded answers are not touched otherwise.
 */
export function redactValues(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) {
    if (s.length < MIN_SECRET_LENGTH) continue;
    out = out.split(s).join('[redacted]');
    const escaped = JSON.stringify(s).slice(1, -1);
    if (escaped !== s) out = out.split(escaped).join('[redacted]');
  }
  return out;
}
