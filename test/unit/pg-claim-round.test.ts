/**
 * One claim round over many queued items on Postgres (engine-claim-round.test.ts's cases on SQLite): the
 * round takes its next candidate of a group from the candidate read of the item it claimed
 * (db/item-with-thread.ts `ClaimCandidate.nextHead`), not from a re-read of the project's heads after each
 * claim. Projects still take turns, an epic is leased once, and a scope shared across projects is leased
 * once while the round claims elsewhere. Real Postgres, the real App, the real simulator holding every call.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig, operationSettingsOf, type DaemonConfig } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { builtinDefinitions } from '../../src/operations/loader.js';
import { OperationRegistry } from '../../src/operations/registry.js';
import { validateDefinition } from '../../src/operations/validate.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project } from '../helpers/harness.js';
import { openRaceDatabase, type RaceDatabase } from '../helpers/pg-race.js';

describe('a claim round with many free slots, on Postgres', () => {
  let dir: string;
  let sim: Simulator;
  let db: RaceDatabase;
  let config: DaemonConfig;
  const apps: App[] = [];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-pg-round-'));
    sim = await createSimulator({ faults: [{ kind: 'hang' }] });
    db = await openRaceDatabase();
    config = {
      ...loadConfig(dir, { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model', COMBINE_DATABASE_URL: db.database.url }),
      maxInFlight: 6,
    };
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.shutdown(0);
    await db?.drop();
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function newApp(operations?: OperationRegistry): App {
    const app = new App({ config, logger: createLogger(null, 'silent'), ...(operations ? { operations } : {}) });
    apps.push(app);
    return app;
  }

  const leased = () =>
    db.reader.all<{ project_id: string; lock_scope: string }>(
      "SELECT project_id, lock_scope FROM llm_work_items WHERE status IN ('claimed', 'running') ORDER BY lock_scope",
    );

  it('fills every slot in one round, projects taking turns, one lease per epic', async () => {
    // Enqueued with the engine stopped, so the next start finds the whole queue at once.
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

    const rows = await leased();
    expect(rows).toHaveLength(6);
    expect(new Set(rows.map((l) => l.lock_scope)).size).toBe(6);
    const perProject = Object.fromEntries(['a', 'b', 'c'].map((p) => [p, rows.filter((l) => l.project_id === p).length]));
    expect(perProject).toEqual({ a: 2, b: 2, c: 2 });
    const queued = await db.reader.get<{ n: number }>("SELECT count(*)::int AS n FROM llm_work_items WHERE status = 'queued'");
    expect(queued?.n).toBe(6);
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
    const seed = newApp(operations);
    await seed.engine.stop(0);
    for (const p of ['a', 'b', 'c']) {
      await seed.projects.import(project(p, 1));
      // Two items of each project in one group (same priority): the note's, then the epic's.
      await seed.threads.run('global_note', { project_id: p }, { force: false, deadlineMs: null, createdBy: null });
      await seed.threads.generateEpic(p, 'E1', { force: false, deadlineMs: null, createdBy: null });
    }
    await seed.shutdown(0);
    apps.length = 0;

    const app = newApp(operations);
    await app.start();
    await app.engine.claimDue();
    expect((await leased()).map((l) => l.lock_scope)).toEqual(['epic:a:E1', 'epic:b:E1', 'epic:c:E1', 'notes:global']);
  });
});
