/**
 * One claim round over many queued items: the producer picks, leases and re-reads candidates inside
 * one transaction — on SQLite re-reading a project's heads after each claim, on Postgres taking a group's
 * next head from the claimed item's candidate read (db/item-with-thread.ts `ClaimCandidate.nextHead`).
 * Real SQLite file or real Postgres, real simulator over HTTP (holding every call open, so what was
 * claimed stays visible as in flight).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig, type DaemonConfig } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import type { OperationRegistry } from '../../src/operations/registry.js';
import { operationSettingsOf } from '../../src/daemon/config/config.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project } from '../helpers/harness.js';
import { registryWithSharedScope } from '../helpers/operations.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';
import { estimateCall } from '../../src/domain/budget.js';
import type { ChatRequest } from '../../src/domain/prompts.js';

describe.each(['sqlite', 'postgres'] as const)('a claim round with many free slots (%s)', (backend) => {
  let dir: string;
  let sim: Simulator;
  let database: TestDatabase | null = null;
  let config: DaemonConfig;
  const apps: App[] = [];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-round-'));
    sim = await createSimulator({ faults: [{ kind: 'hang' }] });
    database = backend === 'postgres' ? await createTestDatabase({ migrated: true }) : null;
    const env = { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model', ...(database ? { COMBINE_DATABASE_URL: database.url } : {}) };
    config = { ...loadConfig(dir, env), maxInFlight: 6 };
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.shutdown(0);
    await database?.drop();
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function newApp(operations?: OperationRegistry): App {
    const app = new App({ config, logger: createLogger(null, 'silent'), ...(operations ? { operations } : {}) });
    apps.push(app);
    return app;
  }

  /** Enqueues with the engine stopped, so the next start finds the whole queue at once; then starts a fresh App. */
  async function startOnQueue(enqueue: (seed: App) => Promise<void>, operations?: OperationRegistry): Promise<App> {
    const seed = newApp(operations);
    await seed.engine.stop(0);
    await enqueue(seed);
    await seed.shutdown(0);
    apps.length = 0;
    const app = newApp(operations);
    await app.start();
    return app;
  }

  const generateAll = (projects: readonly string[], epics: number) => async (seed: App) => {
    for (const p of projects) {
      await seed.projects.import(project(p, epics));
      await seed.threads.generateAll(p, { force: false, deadlineMs: null, createdBy: null });
    }
  };

  const leasedOf = (app: App) =>
    app.reader.all<{ project_id: string; lock_scope: string }>(
      "SELECT project_id, lock_scope FROM llm_work_items WHERE status IN ('claimed', 'running') ORDER BY lock_scope",
    );

  it('fills every slot in one round, projects taking turns, one lease per epic', async () => {
    const app = await startOnQueue(generateAll(['a', 'b', 'c'], 4));
    await app.engine.claimDue(); // nothing more fits: the start's round took all six slots

    const leased = await leasedOf(app);
    expect(leased).toHaveLength(6);
    expect(new Set(leased.map((l) => l.lock_scope)).size).toBe(6);
    const perProject = Object.fromEntries(['a', 'b', 'c'].map((p) => [p, leased.filter((l) => l.project_id === p).length]));
    expect(perProject).toEqual({ a: 2, b: 2, c: 2 });
    const queued = await app.reader.get<{ n: number }>("SELECT count(*) AS n FROM llm_work_items WHERE status = 'queued'");
    expect(Number(queued?.n)).toBe(6);
  });

  it('each call records and sends the request its claim reserved for: the charge reserved is the estimate of that request', async () => {
    const app = await startOnQueue(generateAll(['a', 'b'], 3));
    // The simulator holds every call: wait until the round's six prompts are recorded (and their calls sent).
    const prompts = () =>
      app.reader.all<{ work_item_id: string; payload: string }>("SELECT work_item_id, payload FROM llm_ledger_entries WHERE entry_type = 'prompt'");
    while ((await prompts()).length < 6 || sim.calls.length < 6) await new Promise((r) => setTimeout(r, 20));
    for (const prompt of await prompts()) {
      const request = (JSON.parse(prompt.payload) as { request: ChatRequest }).request;
      const charge = await app.reader.get<{ reserved_tokens: number }>('SELECT reserved_tokens FROM llm_charges WHERE work_item_id = ?', [prompt.work_item_id]);
      expect(charge?.reserved_tokens).toBe(estimateCall(request, undefined).tokens);
    }
    expect(sim.calls).toHaveLength(6);
  });

  it('a lock scope shared across projects: one round leases one of its items and claims the rest elsewhere', async () => {
    // An operation whose mutations all run under one scope, whatever the project.
    const operations = registryWithSharedScope(operationSettingsOf(config));
    const app = await startOnQueue(async (seed) => {
      for (const p of ['a', 'b', 'c']) {
        await seed.projects.import(project(p, 1));
        await seed.threads.run('global_note', { project_id: p }, { force: false, deadlineMs: null, createdBy: null });
        await seed.threads.generateEpic(p, 'E1', { force: false, deadlineMs: null, createdBy: null });
      }
    }, operations);
    await app.engine.claimDue();
    const leased = await leasedOf(app);
    expect(leased.map((l) => l.lock_scope)).toEqual(['epic:a:E1', 'epic:b:E1', 'epic:c:E1', 'notes:global']);
  });
});
