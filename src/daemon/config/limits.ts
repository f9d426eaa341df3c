/**
 * The safety part of the configuration: the limits that keep the daemon up (API connections and
 * request bodies, free disk space), what happens to a call left in doubt by a crash (at-most-once), the
 * log level and the secrets redacted from everything recorded. Schemas for `config.json` (zod; an
 * error names the field) and their resolved shapes.
 */
import { z } from 'zod';
import { parseDurationMs } from '../../domain/duration.js';
import { DEFAULT_SERVER_LIMITS, type ServerLimits } from '../runtime/server-limits.js';
import { ConfigError } from '../../core/errors.js';

/** A duration in config.json: "500ms", "30s", "5m", or a number of milliseconds. */
export const duration = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const ms = parseDurationMs(v);
  if (ms === null) {
    ctx.addIssue({ code: 'custom', message: `"${v}" is not a duration (use e.g. 500ms, 30s, 5m)` });
    return z.NEVER;
  }
  return ms;
});

/**
 * What the recovery scan does with a call that was in flight when the daemon stopped or crashed (it may
 * have been paid): `retry` sends it again (at-least-once), `hold` does not (at-most-once): the item
 * ends `failed` with INTERRUPTED and the thread says the call is in doubt until the user retries or cancels.
 */
export const INTERRUPTED_MODES = ['retry', 'hold'] as const;
export type InterruptedMode = (typeof INTERRUPTED_MODES)[number];

/** pino's levels; anything else is refused at start (exit 2) instead of crashing the logger. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const MiB = 2 ** 20;
export const DEFAULT_MIN_FREE_BYTES = 256 * MiB;
export const DEFAULT_STORAGE_PROBE_MS = 5_000;

const bytes = (max: number) => z.number().int().min(0).max(max);

export const limitsConfigFileSchema = {
  /** The default for every operation (each may set its own: `operations.<kind>.interrupted`). */
  interrupted: z.enum(INTERRUPTED_MODES).optional(),
  storage: z
    .object({
      /** Claiming pauses while COMBINE_HOME's file system has less free space than this. */
      min_free_bytes: bytes(2 ** 50).optional(),
      /** How often free space is measured. */
      probe_interval: duration.optional(),
    })
    .strict()
    .optional(),
  api: z
    .object({
      /** Connections at once; over it the oldest idle one is closed to make room. */
      max_connections: z.number().int().min(1).max(100_000).optional(),
      /** A request's headers (a connection that sends nothing too) must arrive within this: else 408. */
      header_timeout: duration.optional(),
      /** A whole request must arrive within this. */
      request_timeout: duration.optional(),
      /** A kept-alive connection with no new request is closed after this. */
      idle_timeout: duration.optional(),
      max_body_bytes: bytes(2 ** 30).optional(),
      max_import_bytes: bytes(2 ** 31).optional(),
    })
    .strict()
    .optional(),
  redact: z
    .object({
      /** Environment variables whose values are secrets: redacted from the ledger, telemetry, logs and exports. */
      env: z
        .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'not an environment variable name'))
        .max(50)
        .optional(),
    })
    .strict()
    .optional(),
};

type LimitsFile = { [K in keyof typeof limitsConfigFileSchema]?: z.infer<(typeof limitsConfigFileSchema)[K]> };

export interface StorageConfig {
  minFreeBytes: number;
  probeIntervalMs: number;
}

export interface LimitsConfig {
  storage: StorageConfig;
  api: ServerLimits;
  /** Values never recorded anywhere: the API key, the endpoint's password, the values of `redact.env`. */
  secrets: string[];
  /** The names in `redact.env` (for `config show`; their values are in `secrets`). */
  redactEnv: string[];
  logLevel: LogLevel;
}

export function resolveLimits(file: LimitsFile, env: NodeJS.ProcessEnv, p: { apiKey: string | null; baseURL: string }): LimitsConfig {
  const level = env.COMBINE_LOG_LEVEL || 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new ConfigError(`COMBINE_LOG_LEVEL: "${level}" is not a log level (use one of ${LOG_LEVELS.join(', ')})`);
  }
  const a = file.api ?? {};
  return {
    storage: {
      minFreeBytes: file.storage?.min_free_bytes ?? DEFAULT_MIN_FREE_BYTES,
      probeIntervalMs: Math.max(50, file.storage?.probe_interval ?? DEFAULT_STORAGE_PROBE_MS),
    },
    api: {
      maxConnections: a.max_connections ?? DEFAULT_SERVER_LIMITS.maxConnections,
      headerTimeoutMs: a.header_timeout ?? DEFAULT_SERVER_LIMITS.headerTimeoutMs,
      requestTimeoutMs: a.request_timeout ?? DEFAULT_SERVER_LIMITS.requestTimeoutMs,
      idleTimeoutMs: a.idle_timeout ?? DEFAULT_SERVER_LIMITS.idleTimeoutMs,
      maxBodyBytes: a.max_body_bytes ?? DEFAULT_SERVER_LIMITS.maxBodyBytes,
      maxImportBytes: a.max_import_bytes ?? DEFAULT_SERVER_LIMITS.maxImportBytes,
    },
    secrets: configuredSecrets(file, env, p),
    redactEnv: [...(file.redact?.env ?? [])],
    logLevel: level as LogLevel,
  };
}

function configuredSecrets(file: LimitsFile, env: NodeJS.ProcessEnv, p: { apiKey: string | null; baseURL: string }): string[] {
  const values = [p.apiKey, ...(file.redact?.env ?? []).map((name) => env[name])];
  try {
    // Credentials in the endpoint itself (https://user:password@host/v1).
    const url = new URL(p.baseURL);
    if (url.password) values.push(decodeURIComponent(url.password), url.password);
  } catch {
    // validated elsewhere
  }
  return [...new Set(values.filter((v): v is string => typeof v === 'string' && v.length > 0))];
}
