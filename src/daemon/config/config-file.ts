/**
 * `COMBINE_HOME/config.json`: its schema (every key, its bounds and its default's meaning) and how it is
 * read — an error names each bad field. Resolving it with the environment into the effective
 * configuration is config.ts's.
 */
import { existsSync, readFileSync } from 'node:fs';
import { z } from 'zod';
import { describeZodIssues } from '../../domain/project.js';
import { findUnstorableText } from '../../domain/storable-text.js';
import { duration, INTERRUPTED_MODES, limitsConfigFileSchema } from './limits.js';
import { flowConfigFileSchema } from './flow.js';
import { observeConfigFileSchema } from './observe.js';
import { databaseConfigFileSchema } from './database.js';
import { ConfigError } from '../../core/errors.js';
import { LOGICAL_MODEL_NAME, modelsConfigSchema } from '../routing/model-config.js';

/** How the engine asks for structured output (`provider.response_format`); the answer is validated either way. */
export const RESPONSE_FORMATS = ['json_schema', 'json_object', 'none'] as const;
export type ResponseFormat = (typeof RESPONSE_FORMATS)[number];

export const DEFAULT_MAX_ANSWER_BYTES = 4 * 2 ** 20;
export const DEFAULT_MAX_PROVIDER_WAIT_MS = 10 * 60_000;

export const DEFAULT_TEMPERATURE = 0.2;

export const retrySchema = z
  .object({
    base: duration.optional(),
    cap: duration.optional(),
    jitter: z.number().min(0).max(1).optional(),
    max_attempts: z.number().int().min(1).max(100).optional(),
    repair_attempts: z.number().int().min(0).max(10).optional(),
  })
  .strict();

/**
 * Per operation: retry overrides and answer rules (`validation`, checked against the rules schema the
 * operation declares when the daemon loads it). `modules`: more operation module files to load.
 */
const operationsSchema = z.object({ modules: z.array(z.string().min(1).max(4096)).max(200).optional() }).catchall(
  z
    .object({
      retry: retrySchema.optional(),
      validation: z.record(z.string(), z.unknown()).optional(),
      interrupted: z.enum(INTERRUPTED_MODES).optional(),
      /** The logical model this operation's calls use, over the definition's `model`. */
      model: z.string().regex(LOGICAL_MODEL_NAME, 'a logical model name (config models)').optional(),
      /**
       * What an answer that fails the schema gets besides dead_letter (the default): `repair` more calls
       * to the same model with the errors, then at most one call to `escalate_to` (a logical model).
       */
      on_invalid: z
        .object({
          repair: z.number().int().min(0).max(10).optional(),
          escalate_to: z.string().regex(LOGICAL_MODEL_NAME, 'a logical model name (config models)').optional(),
        })
        .strict()
        .optional(),
    })
    .strict(),
);

/** The shortest `engine.lease`: three heartbeats fit in it. */
const MIN_LEASE_MS = 3_000;

export const configFileSchema = z
  .object({
    provider: z
      .object({
        base_url: z.url().optional(),
        model: z.string().min(1).optional(),
        temperature: z.number().min(0).max(2).optional(),
        max_tokens: z.number().int().min(1).optional(),
        timeout: duration.optional(),
        response_format: z.enum(RESPONSE_FORMATS).optional(),
        /** A larger answer is refused while it is read (PROVIDER_ERROR "answer too large"), never stored. */
        max_answer_bytes: z
          .number()
          .int()
          .min(1024)
          .max(2 ** 30)
          .optional(),
      })
      .strict()
      .optional(),
    metrics: z
      .object({ port: z.number().int().min(1).max(65535).optional() })
      .strict()
      .optional(),
    /** The HTTP API and dashboard on 127.0.0.1 (off when absent; 0: any free port). */
    http: z
      .object({ port: z.number().int().min(0).max(65535).optional() })
      .strict()
      .optional(),
    maintenance: z
      .object({
        /** Quiet time (no commits, nothing in flight) before the WAL checkpoint and incremental vacuum run. */
        idle_after: duration.optional(),
      })
      .strict()
      .optional(),
    engine: z
      .object({
        max_in_flight: z.number().int().min(1).max(100_000).optional(),
        max_queued: z.number().int().min(1).max(10_000_000).optional(),
        recovery_interval: duration.optional(),
        /**
         * How long a claim leases an item (default: provider.timeout + 30s); heartbeats renew it every
         * third of it. On a shared database, how long a dead daemon's items wait before another takes them.
         */
        lease: duration
          .refine((ms) => ms >= MIN_LEASE_MS, {
            message: `must be at least ${MIN_LEASE_MS / 1000}s (heartbeats renew a lease every third of it, at most once a second)`,
          })
          .optional(),
        drain_timeout: duration.optional(),
      })
      .strict()
      .optional(),
    /** The longest wait a provider may impose (Retry-After, rate-limit resets); longer ones are cut to this. */
    retry: retrySchema.extend({ max_provider_wait: duration.optional() }).strict().optional(),
    breaker: z
      .object({
        failure_threshold: z.number().int().min(1).max(1000).optional(),
        open: duration.optional(),
        max_open: duration.optional(),
      })
      .strict()
      .optional(),
    /** Per-operation overrides by operation name, e.g. {"<name>": {"retry": {"max_attempts": 5}, "interrupted": "hold", "validation": {…its rules…}}}. */
    operations: operationsSchema.optional(),
    /** Logical model names operations ask for (`model` in a definition) → the provider's model, endpoint, prices, limits. */
    models: modelsConfigSchema.optional(),
    /** Reuse a recorded answer for an identical request instead of paying again (temperature 0 only). */
    cache: z.boolean().optional(),
    ...flowConfigFileSchema,
    ...limitsConfigFileSchema,
    ...observeConfigFileSchema,
    ...databaseConfigFileSchema,
    scheduling: flowConfigFileSchema.scheduling.unwrap().extend({ aging_step: duration.optional() }).strict().optional(),
    scheduler: z
      .object({
        /** A `pending` run older than this is re-claimed (lease-then-LLM's recovery clause). */
        stale_after: duration.optional(),
        /** With catch_up "skip", a tick this late after a fire time still counts as on time. */
        misfire_grace: duration.optional(),
      })
      .strict()
      .optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    // A cached answer stands in for a new call only when the call is deterministic.
    if (c.cache === true && (c.provider?.temperature ?? DEFAULT_TEMPERATURE) !== 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['cache'],
        message: `needs provider.temperature 0 (it is ${c.provider?.temperature ?? `${DEFAULT_TEMPERATURE} by default`}): answers at a higher temperature vary, a cached one would hide that`,
      });
    }
  });
export type ConfigFile = z.infer<typeof configFileSchema>;

/** Reads and validates `config.json` (absent → {}). Throws ConfigError naming each bad field. */
export function readConfigFile(path: string): ConfigFile {
  if (!existsSync(path)) return {};
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ConfigError(`${path}: not valid JSON (${(err as Error).message})`);
  }
  // Its values reach stored rows and queries (a model's name keys the rate limits and every call record):
  // refused like a request's (domain/storable-text.ts); on Postgres a NUL in such a name left every item queued.
  const unstorable = findUnstorableText(json);
  if (unstorable !== null) throw new ConfigError(`${path}: ${unstorable.path}: ${unstorable.problem}`);
  const parsed = configFileSchema.safeParse(json);
  if (!parsed.success) throw new ConfigError(`${path}: ${describeZodIssues(parsed.error).join('; ')}`);
  return parsed.data;
}
