/**
 * The daemon's effective configuration: defaults, then `COMBINE_HOME/config.json` (validated; an error
 * names the field), then environment variables. The API key is held here and nowhere else: it is never
 * logged or written to the ledger (see `redactedConfig`).
 */
import { join } from 'node:path';
import type { z } from 'zod';
import { parseDurationMs } from '../../domain/duration.js';
import type { OperationSettings } from '../../operations/registry.js';
import { redactValues } from '../../domain/errors.js';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from '../../domain/retry.js';
import { DEFAULT_BREAKER_POLICY, type BreakerPolicy } from '../engine/breaker.js';
import { resolveLimits, type InterruptedMode, type LimitsConfig } from './limits.js';
import { checkPricesCoverBudgets, DEFAULT_AGING_STEP_MS, DEFAULT_MAX_QUEUED, type FlowConfig } from './flow.js';
import { resolveObserve, type ObserveConfig } from './observe.js';
import { redactDatabaseUrl, resolveDatabase, type DatabaseConfig } from './database.js';
import { ConfigError } from '../../core/errors.js';
import {
  type ConfigFile,
  DEFAULT_MAX_ANSWER_BYTES,
  DEFAULT_MAX_PROVIDER_WAIT_MS,
  DEFAULT_TEMPERATURE,
  readConfigFile,
  type ResponseFormat,
  type retrySchema,
} from './config-file.js';
import { CANARY_MODEL, CANARY_PROVIDER_MODEL } from '../canary/names.js';
import { endpointSecrets, modelsView, resolveModels, type ModelConfig } from '../routing/model-config.js';

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

/** Config `operations.<name>`, resolved. */
export interface OperationConfig {
  retry?: Partial<RetryPolicy>;
  validation?: Record<string, unknown>;
  /** Logical model over the definition's. */
  model?: string;
  /** A failed schema check: at most one call to this logical model, after any repairs. */
  escalateTo?: string;
}

export interface DaemonConfig extends LimitsConfig, ObserveConfig, DatabaseConfig {
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
  /** Config `engine.lease`; null: the call timeout + 30 s. */
  leaseMs: number | null;
  drainTimeoutMs: number;
  retry: RetryPolicy;
  /** Config `operations.<name>`: retry overrides (over the definition's and the global policy), at-most-once mode, answer rules, model and what an invalid answer gets. */
  operationSettings: Record<string, OperationConfig>;
  /** Operation module files beyond COMBINE_HOME/operations/*.mjs (config `operations.modules`). */
  operationModules: string[];
  /** Logical model name → provider model, endpoint, price and limits (config `models`); `default` is always there. */
  models: Record<string, ModelConfig>;
  /** Provider-requested waits (Retry-After, rate-limit resets) are cut to this. */
  maxProviderWaitMs: number;
  /** Opt-in response cache (only allowed with temperature 0). */
  cache: boolean;
  breaker: BreakerPolicy;
  flow: FlowConfig;
  /** How long a write waits for another process's lock before it counts as an infrastructure failure. */
  busyTimeoutMs: number;
  scheduler: SchedulerConfig;
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

/** The engine's settings from the configuration (engine/engine.ts's options). */
export function engineSettingsOf(c: DaemonConfig) {
  const { maxInFlight, recoveryIntervalMs, breaker, secrets, maxProviderWaitMs } = c;
  const leaseMs = c.leaseMs ?? undefined;
  return { maxInFlight, callTimeoutMs: c.provider.callTimeoutMs, leaseMs, recoveryIntervalMs, breaker, secrets, maxProviderWaitMs };
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

function retryOverrides(o: z.infer<typeof retrySchema> | undefined, interrupted?: InterruptedMode): Partial<RetryPolicy> {
  const out: Partial<RetryPolicy> = {};
  if (interrupted !== undefined) out.interrupted = interrupted;
  if (o?.base !== undefined) out.baseMs = o.base;
  if (o?.cap !== undefined) out.capMs = o.cap;
  if (o?.jitter !== undefined) out.jitter = o.jitter;
  if (o?.max_attempts !== undefined) out.maxAttempts = o.max_attempts;
  if (o?.repair_attempts !== undefined) out.repairAttempts = o.repair_attempts;
  return out;
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
  const retry = { ...DEFAULT_RETRY_POLICY, ...retryOverrides(file.retry, file.interrupted) };
  const { modules, ...perOperation } = file.operations ?? {};
  const operationSettings: DaemonConfig['operationSettings'] = {};
  for (const [name, o] of Object.entries(perOperation)) {
    const settings = o as {
      retry?: z.infer<typeof retrySchema>;
      validation?: Record<string, unknown>;
      interrupted?: InterruptedMode;
      model?: string;
      on_invalid?: { repair?: number; escalate_to?: string };
    };
    const retry = retryOverrides(settings.retry, settings.interrupted);
    // on_invalid.repair is the newer spelling of retry.repair_attempts, and wins over it.
    if (settings.on_invalid?.repair !== undefined) retry.repairAttempts = settings.on_invalid.repair;
    operationSettings[name] = {
      retry,
      ...(settings.validation ? { validation: settings.validation } : {}),
      ...(settings.model ? { model: settings.model } : {}),
      ...(settings.on_invalid?.escalate_to ? { escalateTo: settings.on_invalid.escalate_to } : {}),
    };
  }
  const configured = file.models?.default;
  const fileModel = (typeof configured === 'string' ? configured : configured?.model) || file.provider?.model || 'gpt-4o-mini';
  const model = env.COMBINE_MODEL || fileModel;
  const flow = flowConfig(file, env, model);
  const baseURL = env.OPENAI_BASE_URL || file.provider?.base_url || DEFAULT_BASE_URL;
  const apiKey = env.OPENAI_API_KEY || null;
  let models: Record<string, ModelConfig>;
  try {
    models = resolveModels(
      file.models,
      { model: fileModel, baseURL, apiKey, prices: flow.prices, rateLimits: flow.rateLimits },
      env,
      env.COMBINE_MODEL || undefined,
    );
  } catch (err) {
    throw err instanceof ConfigError ? new ConfigError(`${paths.configPath}: ${err.message}`) : err;
  }
  const problem = checkPricesCoverBudgets(flow, models);
  if (problem) throw new ConfigError(`${paths.configPath}: ${problem}`);
  const limits = resolveLimits(file, env, { apiKey, baseURL });
  const { secrets: databaseSecrets, ...database } = resolveDatabase(file, env);
  return {
    ...paths,
    ...limits,
    ...database,
    // Every endpoint's key and base-URL password is a secret too, and the database URL's password.
    secrets: [...new Set([...limits.secrets, ...Object.values(models).flatMap((m) => endpointSecrets(m)), ...databaseSecrets])],
    ...resolveObserve(file, env),
    provider: {
      baseURL: models.default!.baseURL,
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
    leaseMs: file.engine?.lease ?? null,
    drainTimeoutMs: file.engine?.drain_timeout ?? 10_000,
    retry,
    operationSettings,
    operationModules: modules ?? [],
    models,
    maxProviderWaitMs: file.retry?.max_provider_wait ?? DEFAULT_MAX_PROVIDER_WAIT_MS,
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
    metricsPort: file.metrics?.port ?? null,
    httpPort: file.http?.port ?? null,
    maintenanceIdleMs: file.maintenance?.idle_after ?? 60_000,
    migrationsDir: env.COMBINE_MIGRATIONS_DIR || null,
  };
}

/** What the operation registry needs from the configuration. */
export function operationSettingsOf(c: DaemonConfig): OperationSettings {
  return {
    retry: c.retry,
    params: { model: c.provider.model, temperature: c.provider.temperature, maxTokens: c.provider.maxTokens, responseFormat: c.provider.responseFormat },
    // The configured logical models, and the canary's built-in one.
    models: { ...Object.fromEntries(Object.entries(c.models).map(([logical, m]) => [logical, m.model])), [CANARY_MODEL]: CANARY_PROVIDER_MODEL },
    operations: c.operationSettings,
    configSource: homePaths(c.home).configPath,
  };
}

/** The configuration as shown to people and logs: API keys are reduced to whether one is set, secrets to a count. */
export function redactedConfig(c: DaemonConfig) {
  const { apiKey, ...provider } = c.provider;
  const { secrets, models, databaseUrl, ...rest } = c;
  return {
    ...rest,
    databaseUrl: databaseUrl === null ? null : redactDatabaseUrl(databaseUrl),
    secrets: `${secrets.length} redacted`,
    provider: { ...provider, baseURL: redactValues(provider.baseURL, secrets), api_key: apiKey ? 'set (redacted)' : 'not set' },
    models: JSON.parse(redactValues(JSON.stringify(modelsView(models)), secrets)) as ReturnType<typeof modelsView>,
  };
}
