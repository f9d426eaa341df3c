/**
 * The effective configuration written back in `config.json`'s own shape and key names (snake_case,
 * durations as "30s"): what `combine config show` prints, so that what a user sees can be pasted into
 * the file as it is. The API key is not a config.json key (it comes from OPENAI_API_KEY only).
 */
import type { BudgetLimits } from '../../domain/budget.js';
import { redactValues } from '../../domain/errors.js';
import type { RetryPolicy } from '../../domain/retry.js';
import type { DaemonConfig } from './config.js';
import { DEFAULT_MAX_CLOCK_SKEW_MS, redactDatabaseUrl } from './database.js';

const UNITS: [number, string][] = [
  [86_400_000, 'd'],
  [3_600_000, 'h'],
  [60_000, 'm'],
  [1_000, 's'],
];

/** The largest whole unit: 90000 → "90s", 300000 → "5m", 1500 → "1500ms" (each parses back exactly). */
export function durationText(ms: number): string {
  const unit = UNITS.find(([size]) => ms >= size && ms % size === 0);
  return unit ? `${ms / unit[0]}${unit[1]}` : `${ms}ms`;
}

function retryFile(p: RetryPolicy) {
  return { base: durationText(p.baseMs), cap: durationText(p.capMs), jitter: p.jitter, max_attempts: p.maxAttempts, repair_attempts: p.repairAttempts };
}

/** An operation's retry overrides: only the keys config.json set (the rest comes from the definition and `retry`). */
function retryOverridesFile(p: Partial<RetryPolicy>) {
  return {
    ...(p.baseMs !== undefined ? { base: durationText(p.baseMs) } : {}),
    ...(p.capMs !== undefined ? { cap: durationText(p.capMs) } : {}),
    ...(p.jitter !== undefined ? { jitter: p.jitter } : {}),
    ...(p.maxAttempts !== undefined ? { max_attempts: p.maxAttempts } : {}),
    ...(p.repairAttempts !== undefined ? { repair_attempts: p.repairAttempts } : {}),
  };
}

/** `operations`: the module files to load, and per operation name what config.json sets for it. */
function operationsFile(c: DaemonConfig) {
  const perOperation = Object.entries(c.operationSettings).map(([name, o]) => {
    const retry = retryOverridesFile(o.retry ?? {});
    return [
      name,
      {
        ...(Object.keys(retry).length > 0 ? { retry } : {}),
        ...(o.retry?.interrupted !== undefined ? { interrupted: o.retry.interrupted } : {}),
        ...(o.validation ? { validation: o.validation } : {}),
        ...(o.model ? { model: o.model } : {}),
        ...(o.escalateTo ? { on_invalid: { escalate_to: o.escalateTo } } : {}),
      },
    ];
  });
  return { ...(c.operationModules.length > 0 ? { modules: c.operationModules } : {}), ...Object.fromEntries(perOperation) };
}

/** Budget limits as the file writes them: only the limits that are set. */
function limitsFile(l: BudgetLimits) {
  return Object.fromEntries(Object.entries(l).filter(([, v]) => v !== undefined));
}

export function configFileView(c: DaemonConfig) {
  const f = c.flow;
  return {
    provider: {
      // An endpoint may carry a password (https://user:password@host/v1): never shown.
      base_url: redactValues(c.provider.baseURL, c.secrets),
      model: c.provider.model,
      temperature: c.provider.temperature,
      max_tokens: c.provider.maxTokens,
      timeout: durationText(c.provider.callTimeoutMs),
      response_format: c.provider.responseFormat,
      max_answer_bytes: c.provider.maxAnswerBytes,
    },
    metrics: c.metricsPort === null ? {} : { port: c.metricsPort },
    http: c.httpPort === null ? {} : { port: c.httpPort },
    maintenance: { idle_after: durationText(c.maintenanceIdleMs) },
    engine: {
      max_in_flight: c.maxInFlight,
      max_queued: f.maxQueued,
      recovery_interval: durationText(c.recoveryIntervalMs),
      ...(c.leaseMs !== null ? { lease: durationText(c.leaseMs) } : {}),
      drain_timeout: durationText(c.drainTimeoutMs),
    },
    retry: { ...retryFile(c.retry), max_provider_wait: durationText(c.maxProviderWaitMs) },
    breaker: { failure_threshold: c.breaker.failureThreshold, open: durationText(c.breaker.openMs), max_open: durationText(c.breaker.maxOpenMs) },
    operations: operationsFile(c),
    models: modelsFile(c),
    cache: c.cache,
    interrupted: c.retry.interrupted,
    rate_limits: Object.fromEntries(
      Object.entries(f.rateLimits).map(([model, l]) => [
        model,
        {
          ...(l.requestsPerMinute !== null ? { requests_per_minute: l.requestsPerMinute } : {}),
          ...(l.tokensPerMinute !== null ? { tokens_per_minute: l.tokensPerMinute } : {}),
        },
      ]),
    ),
    scheduling: { project_weights: f.projectWeights, default_weight: f.defaultWeight, aging_step: durationText(f.agingStepMs) },
    prices: f.prices,
    budgets: {
      default: limitsFile(f.budgets.default),
      projects: Object.fromEntries(Object.entries(f.budgets.projects).map(([p, l]) => [p, limitsFile(l)])),
    },
    scheduler: { stale_after: durationText(c.scheduler.staleAfterMs), misfire_grace: durationText(c.scheduler.misfireGraceMs) },
    storage: { min_free_bytes: c.storage.minFreeBytes, probe_interval: durationText(c.storage.probeIntervalMs) },
    api: {
      max_connections: c.api.maxConnections,
      header_timeout: durationText(c.api.headerTimeoutMs),
      request_timeout: durationText(c.api.requestTimeoutMs),
      idle_timeout: durationText(c.api.idleTimeoutMs),
      max_body_bytes: c.api.maxBodyBytes,
      max_import_bytes: c.api.maxImportBytes,
    },
    redact: { env: c.redactEnv },
    pressure: pressureFile(c),
    canary: { interval: durationText(c.canary.intervalMs), timeout: durationText(c.canary.timeoutMs) },
    otel: { ...(c.otel.endpoint !== null ? { endpoint: redactValues(c.otel.endpoint, c.secrets) } : {}), service_name: c.otel.serviceName },
    ...(c.databaseUrl !== null ? { database: databaseFile(c) } : {}),
  };
}

/**
 * Logical models as the file writes them: the string form when a model only renames the provider's
 * (same endpoint, key, price and limits), else the object form with what differs. Never a key, only
 * the variable it is read from. `default` is left out when it is the provider's model as is.
 */
function modelsFile(c: DaemonConfig) {
  const f = c.flow;
  const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
  const entries = Object.entries(c.models).flatMap(([logical, m]): [string, string | Record<string, unknown>][] => {
    const ownEndpoint = m.baseURL !== c.provider.baseURL || m.apiKeyEnv !== null;
    const ownPrice = m.price !== undefined && !same(m.price, f.prices[m.model]);
    const limitsSet = m.rateLimits.requestsPerMinute !== null || m.rateLimits.tokensPerMinute !== null;
    const ownLimits = limitsSet && !same(m.rateLimits, f.rateLimits[m.model]);
    if (!ownEndpoint && !ownPrice && !ownLimits) return logical === 'default' && m.model === c.provider.model ? [] : [[logical, m.model]];
    const entry = {
      model: m.model,
      ...(m.baseURL !== c.provider.baseURL ? { base_url: redactValues(m.baseURL, c.secrets) } : {}),
      ...(m.apiKeyEnv !== null ? { api_key_env: m.apiKeyEnv } : {}),
      ...(ownPrice ? { prices: m.price } : {}),
      ...(ownLimits
        ? {
            rate_limits: {
              ...(m.rateLimits.requestsPerMinute !== null ? { requests_per_minute: m.rateLimits.requestsPerMinute } : {}),
              ...(m.rateLimits.tokensPerMinute !== null ? { tokens_per_minute: m.rateLimits.tokensPerMinute } : {}),
            },
          }
        : {}),
    };
    return [[logical, entry]];
  });
  return Object.fromEntries(entries);
}

function pressureFile(c: DaemonConfig) {
  const p = c.pressure;
  return {
    enabled: p.enabled,
    probe_interval: durationText(p.probeIntervalMs),
    root: p.root,
    cpu: { threshold: p.cpuThreshold, for: durationText(p.cpuForMs), claim_interval: durationText(p.cpuClaimIntervalMs) },
    memory: { min_available_bytes: p.minAvailableMemoryBytes },
    battery: { min_percent: p.minBatteryPercent },
    wal: { max_bytes: p.maxWalBytes },
  };
}

/** `database` as configured: the URL redacted, the clock-skew limit when it is not the default. */
function databaseFile(c: DaemonConfig) {
  const skew = c.maxClockSkewMs === DEFAULT_MAX_CLOCK_SKEW_MS ? {} : { max_clock_skew: durationText(c.maxClockSkewMs) };
  return { url: redactDatabaseUrl(c.databaseUrl!), ...skew };
}
