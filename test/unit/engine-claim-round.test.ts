/**
 * One claim round over many queued items: the producer picks, leases and re-reads candidates inside
 * one transaction. Real SQLite file, real simulator over HTTP (holding every call open, so what was
 * claimed stays visible as in flight).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig, type DaemonConfig } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { builtinDefinitions } from '../../src/operations/loader.js';
import { OperationRegistry } from '../../src/operations/registry.js';
import { validateDefinition } from '../../src/operations/validate.js';
import { operationSettingsOf } from '../../src/daemon/config/config.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project } from '../helpers/harness.js';
import { estimateCall } from '../../src/domain/budget.js';
import type { ChatRequest } from '../../src/domain/prompts.js';

describe('a claim round with many free slots', () => {
  let dir: string;
  let sim: Simulator;
  let config: DaemonConfig;
  const apps: App[] = [];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-round-'));
    sim = await createSimulator({ faults: [{ kind: 'hang' }] });
    config = { ...loadConfig(dir, { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' }), maxInFlight: 6 };
  });
  afterEach(async () => {
    for (const app of apps) await app.shutdown(0);
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function newApp(): App {
    const app = new App({ config, logger: createLogger(null, 'silent') });
    apps.push(app);
    return app;
  }

  it('fills every slot in one round, projects taking turns, one lease per epic', async () => {
    // Enqueue with the engine stopped, so the next start finds the whole queue at once.
    const seed = newApp();
    await seed.engine.stop(0);
    for (const p of ['a', 'b', 'c']) {
      await seed.projects.import(project(p, 4));
      await seed.threads.generateAll(p, { force: false, deadlineMs: null, createdBy: null });
    }
    await seed.shutdown(0);
    apps.length = 0;

    const app = newApp();
    await app.start();
    await app.engine.claimDue(); // nothing more fits: the start's round took all six slots

    const leased = app.db
      .prepare("SELECT project_id, lock_scope FROM llm_work_items WHERE status IN ('claimed', 'running') ORDER BY started_at, rowid")
      .all() as { project_id: string; lock_scope: string }[];
    expect(leased).toHaveLength(6);
    expect(new Set(leased.map((l) => l.lock_scope)).size).toBe(6);
    const perProject = Object.fromEntries(['a', 'b', 'c'].map((p) => [p, leased.filter((l) => l.project_id === p).length]));
    expect(perProject).toEqual({ a: 2, b: 2, c: 2 });
    const queued = app.db.prepare("SELECT count(*) AS n FROM llm_work_items WHERE status = 'queued'").get() as { n: number };
    expect(queued.n).toBe(6);
  });

  it('each call records and sends the request its claim reserved for: the charge reserved is the estimate of that request', async () => {
    const seed = newApp();
    await seed.engine.stop(0);
    for (const p of ['a', 'b']) {
      await seed.projects.import(project(p, 3));
      await seed.threads.generateAll(p, { force: false, deadlineMs: null, createdBy: null });
    }
    await seed.shutdown(0);
    apps.length = 0;

    const app = newApp();
    await app.start();
    // The simulator holds every call: wait until the round's six prompts are recorded (and their calls sent).
    const prompts = () =>
      app.db.prepare("SELECT work_item_id, payload FROM llm_ledger_entries WHERE entry_type = 'prompt'").all() as { work_item_id: string; payload: string }[];
    while (prompts().length < 6 || sim.calls.length < 6) await new Promise((r) => setTimeout(r, 20));
    for (const prompt of prompts()) {
      const request = (JSON.parse(prompt.payload) as { request: ChatRequest }).request;
      const charge = app.db.prepare('SELECT reserved_tokens FROM llm_charges WHERE work_item_id = ?').get(prompt.work_item_id) as { reserved_tokens: number };
      expect(charge.reserved_tokens).toBe(estimateCall(request, undefined).tokens);
    }
    expect(sim.calls).toHaveLength(6);
  });

  it('a lock scope shared across projects: one round leases one of its items and claims the rest elsewhere', async () => {
    // An operation whose mutations all run under one scope, whatever the project.
    const shared = validateDefinition(
      {
        name: 'global_note',
        description: 'one note per project, written one at a time',
        input: { type: 'object', properties: { project_id: { type: 'string' } }, required: ['project_id'] },
        identity: (i: { project_id: string }) => ({ space_type: 'project', space_id: i.project_id, target_doc_type: 'note', target_id: 'one' }),
        lockScope: () => 'notes:global',
        target: (i: { project_id: string }) => ({ project_id: i.project_id, doc_type: 'note' }),
        prompt: () => ({ messages: [{ role: 'user', content: 'Write a note' }] }),
        output: { type: 'object', properties: { note: { type: 'string' } } },
        apply: ({ answer }: { answer: unknown }) => ({ content: answer, summary: {} }),
      },
      'test',
    );
    const operations = new OperationRegistry([...builtinDefinitions(), shared], operationSettingsOf(config));
    const seed = new App({ config, logger: createLogger(null, 'silent'), operations });
    apps.push(seed);
    await seed.engine.stop(0);
    for (const p of ['a', 'b', 'c']) {
      await seed.projects.import(project(p, 1));
      await seed.threads.run('global_note', { project_id: p }, { force: false, deadlineMs: null, createdBy: null });
      await seed.threads.generateEpic(p, 'E1', { force: false, deadlineMs: null, createdBy: null });
    }
    await seed.shutdown(0);
    apps.length = 0;

    const app = new App({ config, logger: createLogger(null, 'silent'), operations });
    apps.push(app);
    await app.start();
    await app.engine.claimDue();
    const leased = app.db.prepare("SELECT lock_scope FROM llm_work_items WHERE status IN ('claimed', 'running') ORDER BY lock_scope").all() as {
      lock_scope: string;
    }[];
    expect(leased.map((l) => l.lock_scope)).toEqual(['epic:a:E1', 'epic:b:E1', 'epic:c:E1', 'notes:global']);
  });
});
