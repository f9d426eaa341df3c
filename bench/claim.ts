/**
 * `npm run bench:claim`: the cost of the fair, budgeted claim against the plain one it replaced.
 *
 * 10,000 queued items (generate-all children, real SQLite file with WAL + synchronous=FULL, through
 * the writer) are claimed in rounds of 8 — the default max_in_flight — until none is left. Variants:
 *
 *   baseline   the pre-issue-4 single statement: UPDATE … WHERE id = (SELECT … ORDER BY priority, not_before LIMIT 1)
 *   fair       claimWorkItems: scheduler heads + pick + guarded UPDATE + lock + charge reservation
 *   budgeted   the same with a (never reached) token budget, so every claim also sums the project's charges
 *
 * Each variant runs over 1 and 20 projects, 3 times; medians and spread of claims/s, and the ratio to
 * the baseline of the same run. Claimed items are not executed (no provider is called).
 */
import { RoundAdmissions } from '../src/daemon/engine/claim-admissions.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { openDatabase, type Db } from '../src/db/connection.js';
import { applyMigrations } from '../src/db/migrate.js';
import { acquireLock } from '../src/db/locks.js';
import { Writer } from '../src/db/writer.js';
import { importProject } from '../src/daemon/services/commands.js';
import { submitOperation } from '../src/daemon/services/submit.js';
import { claimWorkItems, type FlowControl } from '../src/daemon/engine/producer.js';
import { systemClock } from '../src/core/clock.js';
import { writeTx } from '../src/core/tx.js';
import type { EngineEvent } from '../src/daemon/engine/events.js';
import { FairScheduler } from '../src/domain/fair-scheduler.js';
import { RateLimiter } from '../src/domain/rate-limit.js';
import { DEFAULT_RETRY_POLICY } from '../src/domain/retry.js';
import { SHORTHANDS } from '../src/operations/builtin/index.js';
import { builtinDefinitions } from '../src/operations/loader.js';
import { OperationRegistry } from '../src/operations/registry.js';
import { ModelRouter } from '../src/daemon/routing/router.js';
import { DEFAULT_BREAKER_POLICY } from '../src/daemon/engine/breaker.js';
import { hangingProvider } from './lib/engine-run.js';

const operations = new OperationRegistry(builtinDefinitions(), {
  retry: DEFAULT_RETRY_POLICY,
  params: { model: 'm', temperature: 0, maxTokens: 1000 },
  models: {},
  operations: {},
  configSource: 'bench',
});

const ITEMS = 10_000;
const BATCH = 8;
const RUNS = 3;
type Variant = 'baseline' | 'fair' | 'budgeted';

function baselineClaim(db: Db, owner: string, now: number) {
  return db
    .prepare(
      `UPDATE llm_work_items SET status = 'claimed', lease_owner = @owner, lease_expires_at = @until, started_at = @now
       WHERE id = (SELECT w.id FROM llm_work_items w INDEXED BY idx_work_items_claimable
         WHERE w.status = 'queued' AND w.not_before <= @now AND (w.deadline_at IS NULL OR w.deadline_at > @now)
           AND NOT EXISTS (SELECT 1 FROM locks l WHERE l.scope = w.lock_scope AND (l.expires_at IS NULL OR l.expires_at > @now))
         ORDER BY w.priority, w.not_before LIMIT 1)
       AND status = 'queued' RETURNING *`,
    )
    .get({ owner, now, until: now + 60_000 }) as { id: string; lock_scope: string } | undefined;
}

async function run(variant: Variant, projects: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'cmb-bench-claim-'));
  const db = openDatabase(join(dir, 'combine.db'));
  applyMigrations(db);
  const writer = new Writer<EngineEvent>(db, {});
  const write = writeTx(writer, systemClock, { threadsEnded: async () => {}, budgeted: () => true });
  const perProject = ITEMS / projects;
  for (let p = 0; p < projects; p++) {
    const id = `p${p}`;
    const epics = Array.from({ length: perProject }, (_, i) => ({ id: `E${i}`, title: `Epic ${i}`, description: `About epic ${i}.` }));
    await write((tx) => importProject(tx, { id, name: id, epics }));
    const all = SHORTHANDS.generateAll(id);
    await write((tx) =>
      submitOperation(tx, operations, all.operation, all.input, { force: false, deadlineAt: null, createdBy: null, maxQueued: 1e9, traceparent: null }),
    );
  }
  const budget = variant === 'budgeted' ? { total_tokens: 1e12 } : {};
  const flow: FlowControl = {
    scheduler: new FairScheduler({ weights: {}, defaultWeight: 1, agingStepMs: 60_000 }),
    limiter: new RateLimiter(() => ({ requestsPerMinute: null, tokensPerMinute: null })),
    budgetFor: () => budget,
    owners: null,
    router: new ModelRouter(
      {
        default: {
          model: 'bench',
          baseURL: 'in-process://bench',
          apiKeyEnv: null,
          apiKey: null,
          price: undefined,
          rateLimits: { requestsPerMinute: null, tokensPerMinute: null },
        },
      },
      { providerFor: () => hangingProvider(), breaker: DEFAULT_BREAKER_POLICY },
    ),
    operations,
  };
  const owner = randomUUID();
  let claimed = 0;
  const started = performance.now();
  while (claimed < ITEMS) {
    const n = await write(async (tx) => {
      if (variant !== 'baseline') return (await claimWorkItems(tx, flow, owner, BATCH, 60_000, new RoundAdmissions())).claimed.length;
      let k = 0;
      for (; k < BATCH; k++) {
        const item = baselineClaim(db, owner, tx.now);
        if (!item) break;
        await acquireLock(tx.sql, { scope: item.lock_scope, owner: item.id, now: tx.now, expires_at: tx.now + 60_000 });
      }
      return k;
    });
    if (n === 0) throw new Error(`${variant}: stuck at ${claimed}`);
    claimed += n;
  }
  const perSecond = ITEMS / ((performance.now() - started) / 1000);
  await writer.close();
  db.close();
  rmSync(dir, { recursive: true, force: true });
  return perSecond;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  console.log(`| projects | variant | claims/s median (min–max of ${RUNS}) | vs baseline |`);
  console.log('| --- | --- | --- | --- |');
  for (const projects of [1, 20]) {
    const results: Record<Variant, number[]> = { baseline: [], fair: [], budgeted: [] };
    for (let r = 0; r < RUNS; r++) for (const v of ['baseline', 'fair', 'budgeted'] as Variant[]) results[v].push(await run(v, projects));
    for (const v of ['baseline', 'fair', 'budgeted'] as Variant[]) {
      const xs = results[v];
      const ratio = median(xs) / median(results.baseline);
      console.log(`| ${projects} | ${v} | ${Math.round(median(xs))} (${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))}) | ${ratio.toFixed(2)}× |`);
    }
  }
}

void main();
