/**
 * The model router of a daemon: one client per configured endpoint (or one given provider for all,
 * for tests and benchmarks), the canary's built-in zero-cost route, and the routes of an operation.
 */
import type { OperationRegistry } from '../../operations/registry.js';
import { canaryProvider } from '../canary/canary-operation.js';
import { CANARY_MODEL, CANARY_PROVIDER_MODEL } from '../canary/names.js';
import type { DaemonConfig } from '../config/config.js';
import type { Provider } from '../engine/provider.js';
import { createOpenAIProvider } from '../openai-provider.js';
import { ModelRouter } from './router.js';

export function createModelRouter(config: DaemonConfig, provider: Provider | undefined): ModelRouter {
  const router = new ModelRouter(config.models, {
    providerFor: (endpoint) => provider ?? createOpenAIProvider({ ...config.provider, baseURL: endpoint.baseURL, apiKey: endpoint.apiKey }, config.maxInFlight),
    breaker: config.breaker,
    secrets: config.secrets,
  });
  router.addInternalRoute(CANARY_MODEL, CANARY_PROVIDER_MODEL, canaryProvider());
  return router;
}

/**
 * The rate-limit keys of the calls a thread of `kind` makes: its model's and its escalation model's
 * (an orchestration's: its child's). `combine thread` shows their 429 holds; `combine retry` lifts them.
 */
export function routeKeysOf(router: ModelRouter, operations: OperationRegistry, kind: string): string[] {
  let op = operations.get(kind);
  if (op?.fansOut) op = operations.get(op.definition.child!);
  const logical = op ? [op.model, ...(op.escalateTo ? [op.escalateTo] : [])] : ['default'];
  return logical.map((l) => router.route(l).key);
}

/** `config show`: which logical and real model, on which endpoint, each operation's calls use. */
export function routingView(router: ModelRouter, operations: OperationRegistry) {
  const at = (logical: string) => {
    const r = router.route(logical);
    return { model: logical, provider_model: r.model, endpoint: r.endpoint.label };
  };
  return Object.fromEntries(
    operations
      .list()
      .filter((op) => !op.fansOut)
      .map((op) => [op.name, { ...at(op.model), escalate_to: op.escalateTo === null ? null : at(op.escalateTo) }]),
  );
}
