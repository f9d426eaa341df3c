/**
 * Cost views: `combine usage` (per project and UTC day, with budgets), `run --dry-run` and
 * `generate-all --dry-run` (what a request may cost at most, nothing enqueued) and `config show`
 * (the effective configuration).
 */
import { listUsageByProjectDay, sumProjectSpend, type UsageTotals } from '../../db/charges.js';
import type { Sql } from '../../core/sql.js';
import { getProject, listProjects } from '../../db/projects.js';
import { estimateCall, utcDay } from '../../domain/budget.js';
import type { OperationRegistry } from '../../operations/registry.js';
import { childInputs, renderRequest, targetOf } from '../../operations/runtime.js';
import { redactedConfig, type DaemonConfig } from '../config/config.js';
import { configFileView } from '../config/file-view.js';
import { budgetFor } from '../config/flow.js';
import { documentsOf, projectInfo, promptContextFor } from '../engine/operation-context.js';
import { runWithReads } from '../engine/read-ahead.js';
import { checkInput, refusal, requireOperation } from './submit.js';
import { usageView } from '../views.js';
import { CommandError } from '../../core/errors.js';
import type { ModelRouter } from '../routing/router.js';
import { routingView } from '../routing/wiring.js';

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

export async function usageReport(sql: Sql, config: DaemonConfig, projectId: string | null, now: number) {
  if (projectId !== null && !(await getProject(sql, projectId))) {
    throw new CommandError('NOT_FOUND', `no project "${projectId}" (see \`combine project list\`)`);
  }
  const rows = await listUsageByProjectDay(sql, projectId);
  const totals = rows.reduce<UsageTotals>((acc, r) => add(acc, r), { ...ZERO });
  const today = utcDay(now);
  const projects = projectId !== null ? [projectId] : (await listProjects(sql)).map((p) => p.id);
  const budgets = [];
  for (const id of projects) {
    const spentToday = await sumProjectSpend(sql, id, today);
    const spentTotal = await sumProjectSpend(sql, id, null);
    budgets.push({ project_id: id, limits: budgetFor(config.flow, id), spent_today: spentToday, spent_total: spentTotal });
  }
  return { day: today, rows: rows.map((r) => ({ project_id: r.project_id, day: r.day, ...usageView(r) })), totals: usageView(totals), budgets };
}

/**
 * What a request would cost at most: one call per child of an orchestration (or one call), each at its
 * estimated maximum (prompt + max_tokens), the same estimate the claim reserves. Retries, repairs and
 * requests that would be deduplicated are not taken into account; nothing is enqueued.
 */
export async function dryRun(sql: Sql, ops: OperationRegistry, config: DaemonConfig, name: string, input: unknown) {
  const op = requireOperation(ops, name);
  checkInput(op, input);
  try {
    const projectId = targetOf(op, input).project_id;
    const project = await projectInfo(sql, projectId);
    if (!project) throw new CommandError('NOT_FOUND', `no project "${projectId}" (see \`combine project list\`)`);
    const child = op.fansOut ? requireOperation(ops, op.definition.child!) : op;
    const inputs = op.fansOut ? await runWithReads((reads) => childInputs(op, input, documentsOf(sql, reads, projectId))) : [input];
    const requests = await runWithReads((reads) => inputs.map((i) => renderRequest(child, promptContextFor(sql, reads, project, i))));
    const model = requests[0]?.model ?? child.params.model;
    const estimates = requests.map((r) => estimateCall(r, config.flow.prices[r.model]));
    const priced = requests.every((r) => config.flow.prices[r.model] !== undefined);
    return {
      operation: op.name,
      project_id: projectId,
      model,
      calls: requests.length,
      estimated_max_tokens: estimates.reduce((n, e) => n + e.tokens, 0),
      // null, not 0, when a call's model has no price: the most it can cost is unknown.
      estimated_max_cost: priced ? Math.round(estimates.reduce((n, e) => n + e.cost_usd, 0) * 1e6) / 1e6 : null,
      priced,
      max_tokens_per_call: child.params.maxTokens,
    };
  } catch (err) {
    return refusal(err);
  }
}

/**
 * The effective configuration (defaults, config.json, environment), with API keys redacted: the
 * daemon's resolved settings, under `file` the same in config.json's own shape, ready to paste, and
 * `routing`: the logical and real model (and endpoint) of each operation's calls.
 */
export function configView(config: DaemonConfig, operations: OperationRegistry, router: ModelRouter) {
  return { ...redactedConfig(config), file: configFileView(config), routing: routingView(router, operations) };
}
