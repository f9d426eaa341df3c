/**
 * Budgets across daemons sharing one Postgres database (issue 18): two daemons' engines (in process, each
 * with its own home and owner, one database) claim at the same moment from a project whose budget fits
 * three calls' reservations. Their claim transactions decide one after another (the project's budget
 * lock), so together they reserve three calls, not three each; the one that waited finds the others'
 * parks and claims done and ends its round cleanly. Real Postgres, real simulator over HTTP.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { applyPgMigrations } from '../../src/db/pg/migrate.js';
import { estimateCall } from '../../src/domain/budget.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project } from '../helpers/harness.js';
import { storyRequest } from '../helpers/operations.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

describe('a project budget shared by two daemons', () => {
  let database: TestDatabase;
  let sim: Simulator;
  const dirs: string[] = [];
  const apps: App[] = [];
  const p = project('p', 12);

  /** A daemon's App on the shared database; `budgetTokens` for project p. */
  function daemon(budgetTokens: number): App {
    const dir = mkdtempSync(join(tmpdir(), 'cmb-shared-budget-'));
    dirs.push(dir);
    const env = { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model', COMBINE_DATABASE_URL: database.url };
    const config = loadConfig(dir, env);
    config.flow.budgets.projects.p = { total_tokens: budgetTokens };
    const app = new App({ config, logger: createLogger(null, 'silent'), random: () => 0.5 });
    apps.push(app);
    return app;
  }

  beforeEach(async () => {
    database = await createTestDatabase();
    await applyPgMigrations(database.url);
    // Calls stay in flight for the whole test: no settlement frees headroom meanwhile.
    sim = await createSimulator({ latencyMs: 30_000 });
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.shutdown(0);
    await sim.close();
    await database.drop();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('two daemons claiming at once reserve together only what the budget fits', async () => {
    const params = { model: 'test-model', temperature: 0.2, maxTokens: 2048 };
    const perCall = Math.max(...p.epics.map((e) => estimateCall(storyRequest(p, e, params), undefined).tokens));
    const budget = 3 * perCall;
    // The daemon the request goes to does not claim (its engine is stopped), so the two others find
    // the queued children at the same moment.
    const submitter = daemon(budget);
    await submitter.engine.stop(0);
    await submitter.projects.import(p);
    await submitter.threads.generateAll('p', { force: false, deadlineMs: null, createdBy: null });

    const [a, b] = [daemon(budget), daemon(budget)];
    const claimed = await Promise.all([a.engine.claimDue(), b.engine.claimDue()]);
    expect(claimed[0]! + claimed[1]!).toBe(3);
    const reserved = (await a.reader.get<{ n: number; tokens: number }>(
      "SELECT count(*) AS n, coalesce(sum(reserved_tokens), 0) AS tokens FROM llm_charges WHERE status = 'reserved'",
    ))!;
    expect(reserved.n).toBe(3);
    expect(reserved.tokens).toBeLessThanOrEqual(budget);
    const parked = (await a.reader.get<{ n: number }>("SELECT count(*) AS n FROM llm_work_items WHERE error_code = 'BUDGET_EXCEEDED'"))!;
    expect(parked.n).toBe(9);
  });
});
