/**
 * Cost views: `combine usage` (per project and UTC day, with budgets), `generate-all --dry-run` (what a
 * run may cost at most, nothing enqueued) and `config show` (the effective configuration).
 */
import { listUsageByProjectDay, sumProjectSpend, type UsageTotals } from '../db/charges.js';
import type { Db } from '../db/connection.js';
import { getDocument, getProject, listProjects } from '../db/projects.js';
import { estimateCall, utcDay } from '../domain/budget.js';
import { EPIC_ARCHITECTURE } from '../domain/operations.js';
import { epicArchitectureSchema } from '../domain/project.js';
import { renderStoryPrompt, type ModelParams } from '../domain/prompts.js';
import { CommandError } from './commands.js';
import { redactedConfig, type DaemonConfig } from './config.js';
import { configFileView } from './config-file-view.js';
import { budgetFor } from './flow-config.js';
import { usageView } from './views.js';

const ZERO: UsageTotals = {
  calls: 0,
  prompt_tokens: 0,
  completion_tokens: 0,
  total_tokens: 0,
  cost_usd: 0,
  wasted_calls: 0,
  wasted_tokens: 0,
  wasted_cost_usd: 0,
  in_doubt_calls: 0,
  in_doubt_tokens: 0,
  in_doubt_cost_usd: 0,
  reserved_calls: 0,
  reserved_tokens: 0,
  unpriced_calls: 0,
  unpriced_wasted_calls: 0,
  unpriced_in_doubt_calls: 0,
};

function add(a: UsageTotals, b: UsageTotals): UsageTotals {
  const out = { ...a };
  for (const k of Object.keys(ZERO) as (keyof UsageTotals)[]) out[k] = a[k] + b[k];
  return out;
}

export function usageReport(db: Db, config: DaemonConfig, projectId: string | null, now: number) {
  if (projectId !== null && !getProject(db, projectId)) {
    throw new CommandError('NOT_FOUND', `no project "${projectId}" (see \`combine project list\`)`);
  }
  const rows = listUsageByProjectDay(db, projectId);
  const totals = rows.reduce<UsageTotals>((acc, r) => add(acc, r), { ...ZERO });
  const today = utcDay(now);
  const projects = projectId !== null ? [projectId] : listProjects(db).map((p) => p.id);
  const budgets = projects.map((id) => {
    const spentToday = sumProjectSpend(db, id, today);
    const spentTotal = sumProjectSpend(db, id, null);
    return { project_id: id, limits: budgetFor(config.flow, id), spent_today: spentToday, spent_total: spentTotal };
  });
  return { day: today, rows: rows.map((r) => ({ project_id: r.project_id, day: r.day, ...usageView(r) })), totals: usageView(totals), budgets };
}

/**
 * What `generate-all` would cost at most: one call per epic, each at its estimated maximum (prompt +
 * max_tokens), the same estimate the claim reserves. Retries and repairs are not included.
 */
export function dryRunGenerateAll(db: Db, params: ModelParams, config: DaemonConfig, projectId: string) {
  const project = getProject(db, projectId);
  if (!project) throw new CommandError('NOT_FOUND', `no project "${projectId}" (see \`combine project list\`)`);
  const doc = getDocument(db, projectId, EPIC_ARCHITECTURE);
  const epics = doc ? epicArchitectureSchema.parse(JSON.parse(doc.content)).epics : [];
  const price = config.flow.prices[params.model];
  const estimates = epics.map((e) => estimateCall(renderStoryPrompt(project, e, params), price));
  return {
    project_id: projectId,
    model: params.model,
    calls: epics.length,
    estimated_max_tokens: estimates.reduce((n, e) => n + e.tokens, 0),
    // null, not 0, when the model has no price: the most it can cost is unknown.
    estimated_max_cost: price === undefined ? null : Math.round(estimates.reduce((n, e) => n + e.cost_usd, 0) * 1e6) / 1e6,
    priced: price !== undefined,
    max_tokens_per_call: params.maxTokens,
  };
}

/**
 * The effective configuration (defaults, config.json, environment), with the API key redacted: the
 * daemon's resolved settings, and under `file` the same in config.json's own shape, ready to paste.
 */
export function configView(config: DaemonConfig) {
  const { crashAt: _debug, ...shown } = redactedConfig(config);
  return { ...shown, file: configFileView(config) };
}
