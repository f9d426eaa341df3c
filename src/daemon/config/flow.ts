/**
 * The flow-control and cost part of the configuration: backpressure, rate limits, fair scheduling,
 * prices and budgets. Schemas for `config.json` (validated with zod; an error names the field) and the
 * resolved shape the engine uses.
 */
import { z } from 'zod';
import type { BudgetLimits, ModelPrice } from '../../domain/budget.js';
import type { ModelRateLimits } from '../../domain/rate-limit.js';
import { FairScheduler } from '../../domain/fair-scheduler.js';
import type { OwnProjects } from '../../domain/project-owners.js';
import { RateLimiter } from '../../domain/rate-limit.js';
import type { OperationRegistry } from '../../operations/registry.js';
import type { FlowControl } from '../engine/producer.js';
import type { SharedRateLimits } from '../engine/shared-rate-limits.js';
import type { ModelRouter } from '../routing/router.js';

const positive = z.number().positive();

const budgetLimitsSchema = z
  .object({
    daily_tokens: z.number().int().min(0).optional(),
    total_tokens: z.number().int().min(0).optional(),
    daily_cost_usd: z.number().min(0).optional(),
    total_cost_usd: z.number().min(0).optional(),
  })
  .strict();

export const flowConfigFileSchema = {
  /** Per model: {"gpt-4o-mini": {"requests_per_minute": 500, "tokens_per_minute": 200000}}. */
  rate_limits: z.record(z.string().min(1), z.object({ requests_per_minute: positive.optional(), tokens_per_minute: positive.optional() }).strict()).optional(),
  scheduling: z
    .object({
      /** Weighted round robin across projects: {"acme": 3} gets three claims for every one of a weight-1 project. */
      project_weights: z.record(z.string().min(1), z.number().int().min(1).max(1000)).optional(),
      default_weight: z.number().int().min(1).max(1000).optional(),
      /** Every aging step a due item waits lowers its effective priority by one (no starvation). */
      aging_step: z.union([z.number(), z.string()]).optional(),
    })
    .strict()
    .optional(),
  /** USD per million tokens, per model. Needed for any cost budget of that model. */
  prices: z.record(z.string().min(1), z.object({ input_per_million_usd: z.number().min(0), output_per_million_usd: z.number().min(0) }).strict()).optional(),
  budgets: z
    .object({
      /** Limits for every project without its own entry. */
      default: budgetLimitsSchema.optional(),
      projects: z.record(z.string().min(1), budgetLimitsSchema).optional(),
    })
    .strict()
    .optional(),
};

export interface FlowConfig {
  /** Queued work items beyond which a command is refused with QUEUE_FULL. */
  maxQueued: number;
  rateLimits: Record<string, ModelRateLimits>;
  projectWeights: Record<string, number>;
  defaultWeight: number;
  agingStepMs: number;
  prices: Record<string, ModelPrice>;
  budgets: { default: BudgetLimits; projects: Record<string, BudgetLimits> };
}

export const DEFAULT_MAX_QUEUED = 10_000;
export const DEFAULT_AGING_STEP_MS = 60_000;

/** A project's limits: its own entry's fields over the default's. */
export function budgetFor(flow: FlowConfig, projectId: string): BudgetLimits {
  return { ...flow.budgets.default, ...flow.budgets.projects[projectId] };
}

/** Whether any limit applies to the project's spend (most projects have none). */
export function hasBudget(flow: FlowConfig, projectId: string): boolean {
  return Object.values(budgetFor(flow, projectId)).some((v) => v !== undefined);
}

/**
 * Cost budgets need a price for every model that may be called; without one every call would cost
 * "0" and a cost budget would never stop anything. Returns the problem, or null.
 */
export function checkPricesCoverBudgets(flow: FlowConfig, models: Record<string, { model: string; price: ModelPrice | undefined }>): string | null {
  const limits = [flow.budgets.default, ...Object.values(flow.budgets.projects)];
  const wantsCost = limits.some((l) => l.daily_cost_usd !== undefined || l.total_cost_usd !== undefined);
  if (!wantsCost) return null;
  const unpriced = Object.entries(models).find(([, m]) => !m.price);
  if (unpriced) return `budgets: a cost budget is set but prices has no entry for the model "${unpriced[1].model}" (models.${unpriced[0]})`;
  return null;
}

const NO_BUCKETS: ModelRateLimits = { requestsPerMinute: null, tokensPerMinute: null };

/** The engine's flow control from the configuration: the fair scheduler, the rate limiter, budgets and prices. */
export function flowControlOf(
  flow: FlowConfig,
  operations: OperationRegistry,
  router: ModelRouter,
  sharedLimits: SharedRateLimits | null = null,
  owners: OwnProjects | null = null,
): FlowControl {
  return {
    scheduler: new FairScheduler({ weights: flow.projectWeights, defaultWeight: flow.defaultWeight, agingStepMs: flow.agingStepMs }),
    // Keyed by route: the model on its endpoint, with its entry's limits (or the top-level ones of its model).
    // With shared limits the buckets are the database's; the local limiter keeps the provider's windows.
    limiter: new RateLimiter((key) => (sharedLimits ? NO_BUCKETS : router.rateLimitsOf(key))),
    sharedLimits,
    budgetFor: (projectId) => budgetFor(flow, projectId),
    router,
    operations,
    owners,
  };
}
