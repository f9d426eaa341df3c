/**
 * The engine of a daemon, wired from its configuration: the fair scheduler, the rate limiter keyed by
 * route, budgets, the model router, spans, resource pressure and storage guards.
 */
import type { Db } from '../../db/connection.js';
import type { Writer } from '../../db/writer.js';
import { FairScheduler } from '../../domain/fair-scheduler.js';
import { RateLimiter } from '../../domain/rate-limit.js';
import type { OperationRegistry } from '../../operations/registry.js';
import type { DaemonConfig } from '../config.js';
import type { EngineEvent } from '../events.js';
import { budgetFor } from '../flow-config.js';
import type { Logger } from '../logger.js';
import type { ModelRouter } from '../routing/router.js';
import type { Tracer } from '../tracing/tracer.js';
import { Engine, type ClaimThrottle, type Clock, type EngineObserver } from './engine.js';

export interface EngineWiring {
  db: Db;
  writer: Writer<EngineEvent>;
  clock: Clock;
  logger: Logger;
  owner: string;
  config: DaemonConfig;
  operations: OperationRegistry;
  router: ModelRouter;
  tracer: Tracer;
  throttle: ClaimThrottle;
  storage: { readonly allowsClaims: boolean };
  random: () => number;
  observer: EngineObserver;
}

export function createEngine(w: EngineWiring): Engine {
  const { config, router } = w;
  const flow = config.flow;
  return new Engine({
    db: w.db,
    writer: w.writer,
    clock: w.clock,
    logger: w.logger,
    owner: w.owner,
    maxInFlight: config.maxInFlight,
    callTimeoutMs: config.provider.callTimeoutMs,
    operations: w.operations,
    cache: config.cache,
    recoveryIntervalMs: config.recoveryIntervalMs,
    flow: {
      scheduler: new FairScheduler({ weights: flow.projectWeights, defaultWeight: flow.defaultWeight, agingStepMs: flow.agingStepMs }),
      limiter: new RateLimiter((key) => router.rateLimitsOf(key)),
      budgetFor: (projectId) => budgetFor(flow, projectId),
      router,
      operations: w.operations,
    },
    tracer: w.tracer,
    throttle: w.throttle,
    secrets: config.secrets,
    maxProviderWaitMs: config.maxProviderWaitMs,
    storage: w.storage,
    random: w.random,
    crashAt: config.crashAt,
    observer: w.observer,
  });
}
