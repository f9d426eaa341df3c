/**
 * The daemon's effective configuration: defaults, then `COMBINE_HOME/config.json` (validated; an error
 * names the field), then environment variables. The API key is held here and nowhere else: it is never
 * logged or written to the ledger (see `redactedConfig`).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { parseDurationMs } from '../domain/duration.js';
import { NO_ANSWER_RULES, type AnswerRules } from '../domain/answer-rules.js';
import { describeZodIssues } from '../domain/project.js';
import { redactValues } from '../domain/errors.js';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from '../domain/retry.js';
import { DEFAULT_BREAKER_POLICY, type BreakerPolicy } from './engine/breaker.js';
import { ConfigError, duration, INTERRUPTED_MODES, limitsConfigFileSchema, resolveLimits, type InterruptedMode, type LimitsConfig } from './config-limits.js';
import { checkPricesCoverBudgets, DEFAULT_AGING_STEP_MS, DEFAULT_MAX_QUEUED, flowConfigFileSchema, type FlowConfig } from './flow-config.js';

export { ConfigError };

/** How the engine asks for structured output (`provider.response_format`); the answer is validated either way. */
export const RESPONSE_FORMATS = ['json_schema', 'json_object', 'none'] as const;
export type ResponseFormat = (typeof RESPONSE_FORMATS)[number];

export const DEFAULT_MAX_ANSWER_BYTES = 4 * 2 ** 20;
export const DEFAULT_MAX_PROVIDER_WAIT_MS = 10 * 60_000;

const DEFAULT_TEMPERATURE = 0.2;

const retrySchema = z
  .object({
    base: duration.optional(),
    cap: duration.optional(),
    jitter: z.number().min(0).max(1).optional(),
    max_attempts: z.number().int().min(1).max(100).optional(),
    repair_attempts: z.number().int().min(0).max(10).optional(),
  })
  .strict();

/** Extra acceptance rules for an operation's answers (see domain/answer-rules.ts). */
const validationSchema = z
  .object({
    min_stories: z.number().int().min(1).max(1000).optional(),
    max_stories: z.number().int().min(1).max(1000).optional(),
    required_story_fields: z.array(z.string().min(1)).max(50).optional(),
  })
  .strict()
  .refine((v) => v.min_stories === undefined || v.max_stories === undefined || v.min_stories <= v.max_stories, {
    message: 'min_stories must not exceed max_stories',
  });

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
        max_answer_bytes: z.number().int().min(1024).max(2 ** 30).optional(),
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
    /** Per-operation overrides, e.g. {"story_generate_epic": {"retry": {"max_attempts": 5}, "validation": {"min_stories": 4}}}. */
    operations: z
      .record(z.string(), z.object({ retry: retrySchema.optional(), validation: validationSchema.optional(), interrupted: z.enum(INTERRUPTED_MODES).optional() }).strict())
      .optional(),
    /** Reuse a recorded answer for an identical request instead of paying again (temperature 0 only). */
    cache: z.boolean().optional(),
    ...flowConfigFileSchema,
    ...limitsConfigFileSchema,
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

export interface ProviderConfig {
  baseURL: string;
  apiKey: string | null;
  model: string;
  temperature: number;
  maxTokens: number;
  callTimeoutMs: number;
  responseFormat: ResponseFormat;
  maxAnswerBytes: number;
}

export interface DaemonConfig extends LimitsConfig {
  home: string;
  dbPath: string;
  socketPath: string;
  logPath: string;
  pidPath: string;
  /** Online backups taken before migrations (the newest 3 are kept). */
  backupsDir: string;
  provider: ProviderConfig;
  maxInFlight: number;
  recoveryIntervalMs: number;
  drainTimeoutMs: number;
  retry: RetryPolicy;
  /** Per operation kind (config `operations.<kind>.retry` and `.interrupted`). */
  operationRetry: Record<string, RetryPolicy>;
  /** Provider-requested waits (Retry-After, rate-limit resets) are cut to this. */
  maxProviderWaitMs: number;
  /** Extra answer acceptance rules per operation kind (absent: none). */
  operationRules: Record<string, AnswerRules>;
  /** Opt-in response cache (only allowed with temperature 0). */
  cache: boolean;
  breaker: BreakerPolicy;
  flow: FlowConfig;
  /** How long a write waits for another process's lock before it counts as an infrastructure failure. */
  busyTimeoutMs: number;
  scheduler: SchedulerConfig;
  /** Debug switch for crash tests: exit abruptly at this point of the pipeline. */
  crashAt: string | null;
  /** 127.0.0.1 port serving /metrics, or null. */
  metricsPort: number | null;
  /** 127.0.0.1 port serving the HTTP API and dashboard, or null (off). */
  httpPort: number | null;
  maintenanceIdleMs: number;
  /**
   * Test/debug switch (COMBINE_MIGRATIONS_DIR): apply migrations from this folder instead of the ones
   * shipped with combine. Used to prove that a failing migration leaves the database as it was.
   */
  migrationsDir: string | null;
}

export interface SchedulerConfig {
  staleAfterMs: number;
  misfireGraceMs: number;
}

export const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

export function homePaths(home: string) {
  return {
    home,
    dbPath: join(home, 'combine.db'),
    socketPath: join(home, 'combine.sock'),
    logPath: join(home, 'daemon.log'),
    pidPath: join(home, 'daemon.pid'),
    backupsDir: join(home, 'backups'),
    configPath: join(home, 'config.json'),
  };
}

/** Reads and validates `config.json` (absent → {}). Throws ConfigError naming each bad field. */
export function readConfigFile(path: string): ConfigFile {
  if (!existsSync(path)) return {};
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ConfigError(`${path}: not valid JSON (${(err as Error).message})`);
  }
  const parsed = configFileSchema.safeParse(json);
  if (!parsed.success) throw new ConfigError(`${path}: ${describeZodIssues(parsed.error).join('; ')}`);
  return parsed.data;
}

function mergeRetry(base: RetryPolicy, o: z.infer<typeof retrySchema> | undefined, interrupted?: InterruptedMode): RetryPolicy {
  return {
    interrupted: interrupted ?? base.interrupted,
    baseMs: o?.base ?? base.baseMs,
    capMs: o?.cap ?? base.capMs,
    jitter: o?.jitter ?? base.jitter,
    maxAttempts: o?.max_attempts ?? base.maxAttempts,
    repairAttempts: o?.repair_attempts ?? base.repairAttempts,
  };
}

function envDuration(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const ms = parseDurationMs(raw);
  if (ms === null) throw new ConfigError(`${name}: "${raw}" is not a duration (use e.g. 500ms, 30s, 5m)`);
  return ms;
}

function envNumber(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new ConfigError(`${name}: "${raw}" is not a positive number`);
  return n;
}

function envInt(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new ConfigError(`${name}: "${raw}" is not a positive integer`);
  return n;
}

/** The effective configuration for a daemon serving `home`. */
export function loadConfig(home: string, env: NodeJS.ProcessEnv = process.env): DaemonConfig {
  const paths = homePaths(home);
  const file = readConfigFile(paths.configPath);
  const retry = mergeRetry(DEFAULT_RETRY_POLICY, file.retry, file.interrupted);
  const operationRetry: Record<string, RetryPolicy> = {};
  const operationRules: Record<string, AnswerRules> = {};
  for (const [op, o] of Object.entries(file.operations ?? {})) {
    operationRetry[op] = mergeRetry(retry, o.retry, o.interrupted);
    if (o.validation) {
      operationRules[op] = {
        minStories: o.validation.min_stories ?? NO_ANSWER_RULES.minStories,
        maxStories: o.validation.max_stories ?? NO_ANSWER_RULES.maxStories,
        requiredStoryFields: o.validation.required_story_fields ?? NO_ANSWER_RULES.requiredStoryFields,
      };
    }
  }
  const model = env.COMBINE_MODEL || file.provider?.model || 'gpt-4o-mini';
  const flow = flowConfig(file, env, model);
  const problem = checkPricesCoverBudgets(flow, model);
  if (problem) throw new ConfigError(`${paths.configPath}: ${problem}`);
  const baseURL = env.OPENAI_BASE_URL || file.provider?.base_url || DEFAULT_BASE_URL;
  const apiKey = env.OPENAI_API_KEY || null;
  return {
    ...paths,
    ...resolveLimits(file, env, { apiKey, baseURL }),
    provider: {
      baseURL,
      apiKey,
      model,
      temperature: file.provider?.temperature ?? DEFAULT_TEMPERATURE,
      maxTokens: file.provider?.max_tokens ?? 2048,
      callTimeoutMs: envDuration(env, 'COMBINE_CALL_TIMEOUT') ?? file.provider?.timeout ?? 60_000,
      responseFormat: file.provider?.response_format ?? 'json_schema',
      maxAnswerBytes: file.provider?.max_answer_bytes ?? DEFAULT_MAX_ANSWER_BYTES,
    },
    maxInFlight: envInt(env, 'COMBINE_MAX_IN_FLIGHT') ?? file.engine?.max_in_flight ?? 8,
    recoveryIntervalMs: file.engine?.recovery_interval ?? 30_000,
    drainTimeoutMs: file.engine?.drain_timeout ?? 10_000,
    retry,
    operationRetry,
    maxProviderWaitMs: file.retry?.max_provider_wait ?? DEFAULT_MAX_PROVIDER_WAIT_MS,
    operationRules,
    cache: file.cache ?? false,
    breaker: {
      failureThreshold: file.breaker?.failure_threshold ?? DEFAULT_BREAKER_POLICY.failureThreshold,
      openMs: file.breaker?.open ?? DEFAULT_BREAKER_POLICY.openMs,
      maxOpenMs: file.breaker?.max_open ?? DEFAULT_BREAKER_POLICY.maxOpenMs,
    },
    flow,
    busyTimeoutMs: envDuration(env, 'COMBINE_BUSY_TIMEOUT') ?? 5000,
    scheduler: {
      staleAfterMs: file.scheduler?.stale_after ?? 5 * 60_000,
      misfireGraceMs: file.scheduler?.misfire_grace ?? 60_000,
    },
    crashAt: env.COMBINE_CRASH_AT || null,
    metricsPort: file.metrics?.port ?? null,
    httpPort: file.http?.port ?? null,
    maintenanceIdleMs: file.maintenance?.idle_after ?? 60_000,
    migrationsDir: env.COMBINE_MIGRATIONS_DIR || null,
  };
}

/**
 * Backpressure, rate limits, scheduling, prices and budgets. Environment overrides:
 * COMBINE_MAX_QUEUED, and COMBINE_REQUESTS_PER_MINUTE / COMBINE_TOKENS_PER_MINUTE for the configured model.
 */
function flowConfig(file: ConfigFile, env: NodeJS.ProcessEnv, model: string): FlowConfig {
  const rateLimits: FlowConfig['rateLimits'] = {};
  for (const [m, l] of Object.entries(file.rate_limits ?? {})) {
    rateLimits[m] = { requestsPerMinute: l.requests_per_minute ?? null, tokensPerMinute: l.tokens_per_minute ?? null };
  }
  const rpm = envNumber(env, 'COMBINE_REQUESTS_PER_MINUTE');
  const tpm = envNumber(env, 'COMBINE_TOKENS_PER_MINUTE');
  if (rpm !== undefined || tpm !== undefined) {
    const base = rateLimits[model] ?? { requestsPerMinute: null, tokensPerMinute: null };
    rateLimits[model] = { requestsPerMinute: rpm ?? base.requestsPerMinute, tokensPerMinute: tpm ?? base.tokensPerMinute };
  }
  return {
    maxQueued: envInt(env, 'COMBINE_MAX_QUEUED') ?? file.engine?.max_queued ?? DEFAULT_MAX_QUEUED,
    rateLimits,
    projectWeights: file.scheduling?.project_weights ?? {},
    defaultWeight: file.scheduling?.default_weight ?? 1,
    agingStepMs: file.scheduling?.aging_step ?? DEFAULT_AGING_STEP_MS,
    prices: file.prices ?? {},
    budgets: { default: file.budgets?.default ?? {}, projects: file.budgets?.projects ?? {} },
  };
}

/** The configuration as shown to people and logs: the API key is reduced to whether one is set, secrets to a count. */
export function redactedConfig(c: DaemonConfig) {
  const { apiKey, ...provider } = c.provider;
  const { secrets, ...rest } = c;
  return { ...rest, secrets: `${secrets.length} redacted`, provider: { ...provider, baseURL: redactValues(provider.baseURL, secrets), api_key: apiKey ? 'set (redacted)' : 'not set' } };
}
