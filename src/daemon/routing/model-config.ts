/**
 * Config `models`: logical model names (what operations ask for: `default`, `fast`, `strong` …) → the
 * provider's model and where it is served. An entry is a model string (today's form, on the provider's
 * endpoint) or `{model, base_url?, api_key_env?, prices?, rate_limits?}`. Without an entry, `default` is
 * the `provider` settings (`provider.model`, `OPENAI_BASE_URL`, `OPENAI_API_KEY`); `COMBINE_MODEL`
 * overrides `models.default.model`, so configurations written before models existed keep working.
 *
 * Model slugs live here and in config.json only: operations name logical models.
 */
import { z } from 'zod';
import type { ModelPrice } from '../../domain/budget.js';
import type { ModelRateLimits } from '../../domain/rate-limit.js';
import { ConfigError } from '../../core/errors.js';

/** Logical names: letters, digits, `_` and `-`; a name with a colon is reserved for the daemon's own routes. */
export const LOGICAL_MODEL_NAME = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;
export const DEFAULT_MODEL = 'default';

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'not an environment variable name');
export const priceSchema = z.object({ input_per_million_usd: z.number().min(0), output_per_million_usd: z.number().min(0) }).strict();
export const rateLimitSchema = z
  .object({ requests_per_minute: z.number().positive().optional(), tokens_per_minute: z.number().positive().optional() })
  .strict();

const modelEntrySchema = z.union([
  z.string().min(1).max(200),
  z
    .object({
      model: z.string().min(1).max(200),
      /** Another OpenAI-compatible endpoint for this model; absent: the provider's. */
      base_url: z.url().optional(),
      /** The environment variable holding this endpoint's API key; absent: OPENAI_API_KEY. */
      api_key_env: envName.optional(),
      prices: priceSchema.optional(),
      rate_limits: rateLimitSchema.optional(),
    })
    .strict(),
]);

export const modelsConfigSchema = z.record(
  z.string().regex(LOGICAL_MODEL_NAME, 'a logical model name is letters, digits, _ and - (at most 64)'),
  modelEntrySchema,
);
export type ModelsConfigFile = z.infer<typeof modelsConfigSchema>;

/** One logical model, resolved: what is sent (`model`), where (`baseURL` with its key), at what price and pace. */
export interface ModelConfig {
  model: string;
  baseURL: string;
  /** The variable the key came from (null: OPENAI_API_KEY, the provider's). */
  apiKeyEnv: string | null;
  apiKey: string | null;
  /** The entry's own `prices`, else the top-level `prices` of its model. */
  price: ModelPrice | undefined;
  /** The entry's own `rate_limits`, else the top-level `rate_limits` of its model. */
  rateLimits: ModelRateLimits;
}

export interface ProviderDefaults {
  model: string;
  baseURL: string;
  apiKey: string | null;
  prices: Record<string, ModelPrice>;
  rateLimits: Record<string, ModelRateLimits>;
}

const NO_LIMITS: ModelRateLimits = { requestsPerMinute: null, tokensPerMinute: null };

function limitsOf(l: z.infer<typeof rateLimitSchema>): ModelRateLimits {
  return { requestsPerMinute: l.requests_per_minute ?? null, tokensPerMinute: l.tokens_per_minute ?? null };
}

/**
 * Every logical model of the configuration, `default` always among them. `envModel` (COMBINE_MODEL)
 * overrides the default's model; an `api_key_env` that is not set is an error naming it (a call would
 * fail with 401 later, after the user waited).
 */
export function resolveModels(
  file: ModelsConfigFile | undefined,
  p: ProviderDefaults,
  env: NodeJS.ProcessEnv,
  envModel: string | undefined,
): Record<string, ModelConfig> {
  const out: Record<string, ModelConfig> = {};
  const entries = { ...(file ?? {}) };
  for (const [logical, entry] of Object.entries({ [DEFAULT_MODEL]: entries[DEFAULT_MODEL] ?? p.model, ...entries })) {
    const e = typeof entry === 'string' ? { model: entry } : entry;
    const model = logical === DEFAULT_MODEL && envModel ? envModel : e.model;
    const apiKeyEnv = 'api_key_env' in e ? (e.api_key_env ?? null) : null;
    const apiKey = apiKeyEnv ? (env[apiKeyEnv] ?? null) : p.apiKey;
    if (apiKeyEnv && !apiKey) throw new ConfigError(`models.${logical}.api_key_env: the environment variable ${apiKeyEnv} is not set`);
    const baseURL = ('base_url' in e ? e.base_url : undefined) ?? p.baseURL;
    const ownLimits = 'rate_limits' in e && e.rate_limits ? limitsOf(e.rate_limits) : null;
    out[logical] = {
      model,
      baseURL,
      apiKeyEnv,
      apiKey,
      price: ('prices' in e ? e.prices : undefined) ?? p.prices[model],
      rateLimits: ownLimits ?? p.rateLimits[model] ?? NO_LIMITS,
    };
  }
  return out;
}

/** `config show`: each logical model without its key (only whether one is set). */
export function modelsView(models: Record<string, ModelConfig>) {
  return Object.fromEntries(
    Object.entries(models).map(([logical, m]) => [
      logical,
      {
        model: m.model,
        base_url: m.baseURL,
        api_key_env: m.apiKeyEnv ?? 'OPENAI_API_KEY',
        api_key: m.apiKey ? 'set (redacted)' : 'not set',
        prices: m.price ?? null,
        rate_limits: m.rateLimits,
      },
    ]),
  );
}

/** A model endpoint's credentials: its API key and a password in its base URL. */
export function endpointSecrets(m: ModelConfig): string[] {
  const out = m.apiKey ? [m.apiKey] : [];
  try {
    const url = new URL(m.baseURL);
    if (url.password) out.push(decodeURIComponent(url.password), url.password);
  } catch {
    // validated by the schema
  }
  return out;
}
