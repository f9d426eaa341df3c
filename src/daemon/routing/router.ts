/**
 * The model router: a logical model name (what an operation asks for) → a route, i.e. the provider's
 * model on one endpoint, with its price and rate limits. Each endpoint has its own client and its own
 * circuit breaker, so one provider being down never stops calls to another; the rate limiter and the
 * charges key calls by `route.key` (the model, and the endpoint when it is not the default one).
 *
 * Business code names logical models only; the slugs come from config (model-config.ts).
 */
import type { ModelPrice } from '../../domain/budget.js';
import type { ModelRateLimits } from '../../domain/rate-limit.js';
import { redactValues } from '../../domain/errors.js';
import { CircuitBreaker, type BreakerPolicy, type BreakerSnapshot, type BreakerState } from '../engine/breaker.js';
import type { Provider } from '../engine/provider.js';
import { DEFAULT_MODEL, type ModelConfig } from './model-config.js';

export interface Endpoint {
  /** Base URL and the key's variable: calls with another key are another endpoint. */
  id: string;
  /** For health and the ledger: the base URL (credentials redacted) and the key's variable when it is not the default. */
  label: string;
  baseURL: string;
  apiKey: string | null;
}

export interface ModelRoute {
  logical: string;
  /** What the request's `model` says. */
  model: string;
  /** Rate limits, charges and metrics key calls by this: the model, plus `@ endpoint` off the default endpoint. */
  key: string;
  endpoint: Endpoint;
  price: ModelPrice | undefined;
  rateLimits: ModelRateLimits;
  /** The daemon's own zero-cost route (the canary): no charge is reserved and no budget is checked. */
  free: boolean;
}

interface EndpointState {
  endpoint: Endpoint;
  provider: Provider;
  breaker: CircuitBreaker;
}

export interface RouterOptions {
  /** The client of an endpoint (tests and benchmarks give one provider for all). */
  providerFor(endpoint: Endpoint): Provider;
  breaker: BreakerPolicy;
  /** Secrets to cut out of endpoint labels (a password in a base URL). */
  secrets?: readonly string[];
}

export class UnknownModelError extends Error {
  constructor(readonly logical: string) {
    super(`no model "${logical}" is configured (config models)`);
    this.name = 'UnknownModelError';
  }
}

export class ModelRouter {
  private readonly byLogical = new Map<string, ModelRoute>();
  private readonly byKey = new Map<string, ModelRoute>();
  private readonly endpoints = new Map<string, EndpointState>();

  constructor(
    models: Record<string, ModelConfig>,
    private readonly o: RouterOptions,
  ) {
    const defaultBase = models[DEFAULT_MODEL]?.baseURL;
    for (const [logical, m] of Object.entries(models)) {
      const endpoint = this.endpointOf(m.baseURL, m.apiKeyEnv, m.apiKey);
      const key = m.baseURL === defaultBase && m.apiKeyEnv === null ? m.model : `${m.model} @ ${endpoint.label}`;
      this.add({ logical, model: m.model, key, endpoint, price: m.price, rateLimits: m.rateLimits, free: false });
    }
  }

  /** A route the daemon itself serves (the canary's zero-cost provider), on its own endpoint and breaker. */
  addInternalRoute(logical: string, model: string, provider: Provider): ModelRoute {
    const endpoint: Endpoint = { id: provider.endpoint, label: provider.endpoint, baseURL: provider.endpoint, apiKey: null };
    this.endpoints.set(endpoint.id, { endpoint, provider, breaker: new CircuitBreaker(this.o.breaker) });
    return this.add({ logical, model, key: model, endpoint, price: undefined, rateLimits: { requestsPerMinute: null, tokensPerMinute: null }, free: true });
  }

  private add(route: ModelRoute): ModelRoute {
    this.byLogical.set(route.logical, route);
    if (!this.byKey.has(route.key)) this.byKey.set(route.key, route);
    return route;
  }

  private endpointOf(baseURL: string, apiKeyEnv: string | null, apiKey: string | null): Endpoint {
    const id = `${baseURL}\n${apiKeyEnv ?? ''}`;
    const known = this.endpoints.get(id);
    if (known) return known.endpoint;
    const shown = redactValues(baseURL, this.o.secrets ?? []);
    const endpoint: Endpoint = { id, label: apiKeyEnv ? `${shown} (${apiKeyEnv})` : shown, baseURL, apiKey };
    this.endpoints.set(id, { endpoint, provider: this.o.providerFor(endpoint), breaker: new CircuitBreaker(this.o.breaker) });
    return endpoint;
  }

  /** The route of a logical model; throws UnknownModelError for a name not configured. */
  route(logical: string): ModelRoute {
    const r = this.byLogical.get(logical);
    if (!r) throw new UnknownModelError(logical);
    return r;
  }

  get defaultRoute(): ModelRoute {
    return this.route(DEFAULT_MODEL);
  }

  /** The route calls of this key go through (for prices and limits of a recorded charge). */
  routeOfKey(key: string): ModelRoute | undefined {
    return this.byKey.get(key);
  }

  priceOf(key: string): ModelPrice | undefined {
    return this.byKey.get(key)?.price;
  }

  rateLimitsOf(key: string): ModelRateLimits {
    return this.byKey.get(key)?.rateLimits ?? { requestsPerMinute: null, tokensPerMinute: null };
  }

  provider(route: ModelRoute): Provider {
    return this.endpoints.get(route.endpoint.id)!.provider;
  }

  breaker(route: ModelRoute): CircuitBreaker {
    return this.endpoints.get(route.endpoint.id)!.breaker;
  }

  /** Every configured (not internal) route, for `config show` and the metrics' model labels. */
  routes(): ModelRoute[] {
    return [...this.byLogical.values()].filter((r) => !r.free);
  }

  /** Health: each endpoint's breaker, by label. */
  breakerSnapshots(): Record<string, BreakerSnapshot> {
    return Object.fromEntries([...this.endpoints.values()].map((e) => [e.endpoint.label, e.breaker.snapshot()]));
  }

  /** The worst breaker state over all endpoints (the single `combine_breaker_state` gauge). */
  worstBreakerState(): BreakerState {
    const states = [...this.endpoints.values()].map((e) => e.breaker.snapshot().state);
    return states.includes('open') ? 'open' : states.includes('half_open') ? 'half_open' : 'closed';
  }

  /** When the next open breaker lets a probe through (null if none is open). */
  nextBreakerReopen(): number | null {
    const times = [...this.endpoints.values()].map((e) => e.breaker.reopensAt()).filter((t): t is number => t !== null);
    return times.length > 0 ? Math.min(...times) : null;
  }
}
