/**
 * Answers to one document from three daemons at once, on one Postgres database (issue 18): each answer
 * locks the document's row, plans its mutation from the version locked, and writes the next version, the
 * new parts and the mutation row (those two in the COMMIT's query). Every version must be planned from
 * the one before it — none lost, none applied twice — and an answer whose `apply` fails against the
 * version it would replace is dead-lettered with nothing of it written. Real Postgres, real simulator
 * over HTTP, the real module loader.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { applyPgMigrations } from '../../src/db/pg/migrate.js';
import { verifyLedger } from '../../src/ledger/verify.js';
import { loadOperations } from '../../src/operations/loader.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project, waitUntil } from '../helpers/harness.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

const ITEMS = 30;
const FITS = 24;

/** Appends its input's text to the document's list; refuses once the list holds FITS entries. */
const tallyModule = `export default {
  name: 'tally',
  description: 'Appends a text to a list',
  input: { type: 'object', properties: { project_id: { type: 'string' }, text: { type: 'string' } }, required: ['project_id', 'text'] },
  identity: (i) => ({ space_type: 'project', space_id: i.project_id, target_doc_type: 'tally', target_id: i.text }),
  lockScope: (i) => 'tally:' + i.project_id + ':' + i.text,
  target: (i) => ({ project_id: i.project_id, doc_type: 'tally' }),
  prompt: ({ input }) => ({ messages: [{ role: 'user', content: 'Summarize: ' + input.text }] }),
  output: { type: 'object', properties: { summary: { type: 'string' } }, required: ['summary'] },
  apply: ({ current, input }) => {
    const entries = current ? current.entries : [];
    if (entries.length >= ${FITS}) throw new Error('the list is full');
    return { content: { entries: [...entries, input.text] }, summary: { entries: entries.length + 1 } };
  },
};`;

describe('answers to one document from three daemons on one Postgres', () => {
  let database: TestDatabase;
  let sim: Simulator;
  const dirs: string[] = [];
  const apps: App[] = [];

  async function daemon(): Promise<App> {
    const dir = mkdtempSync(join(tmpdir(), 'cmb-pg-docs-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'operations'));
    writeFileSync(join(dir, 'operations', 'tally.mjs'), tallyModule);
    const config = loadConfig(dir, { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k', COMBINE_DATABASE_URL: database.url });
    const operations = await loadOperations(dir, [], operationSettingsOf(config));
    const app = new App({ config, logger: createLogger(null, 'silent'), random: () => 0.5, operations });
    apps.push(app);
    return app;
  }

  beforeEach(async () => {
    database = await createTestDatabase();
    await applyPgMigrations(database.url);
    sim = await createSimulator({ latencyMs: 20 });
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.shutdown(0);
    await sim.close();
    await database.drop();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('every version is planned from the one it replaces; an answer that no longer fits is dead-lettered unwritten', async () => {
    // Queued by a daemon that does not run them; then three engines start together and take them between them.
    const seed = await daemon();
    await seed.engine.stop(0);
    await seed.projects.import(project('p', 1));
    for (let i = 0; i < ITEMS; i++) await seed.threads.run('tally', { project_id: 'p', text: `t${i}` }, { force: false, deadlineMs: null, createdBy: null });
    await seed.shutdown(0);
    apps.length = 0;
    const daemons = [await daemon(), await daemon(), await daemon()];
    // The prompts each daemon recorded (its bus carries its own writes' events only): which daemon ran what.
    const prompts = daemons.map(() => 0);
    for (const [i, d] of daemons.entries()) {
      d.bus.subscribe((e) => {
        if (e.type === 'ledger' && e.entry_type === 'prompt') prompts[i]!++;
      });
    }
    await Promise.all(daemons.map((d) => d.start()));
    const reader = daemons[0]!.reader;
    await waitUntil(
      async () =>
        (await reader.get<{ n: number }>("SELECT count(*) AS n FROM llm_threads WHERE kind = 'tally' AND status IN ('complete', 'failed')"))!.n === ITEMS,
      'every tally thread to end',
      30_000,
    );

    const doc = await daemons[0]!.projects.document('p', 'tally', null);
    const entries = (doc!.content as { entries: string[] }).entries;
    expect(doc!.version).toBe(FITS);
    expect(entries).toHaveLength(FITS);
    expect(new Set(entries).size).toBe(FITS);
    // One mutation per version, each from the version before it.
    const mutations = await reader.all<{ from_version: number; to_version: number }>('SELECT from_version, to_version FROM mutations ORDER BY from_version');
    expect(mutations.map((m) => [m.from_version, m.to_version])).toEqual(Array.from({ length: FITS }, (_, v) => [v, v + 1]));
    const ended = await reader.all<{ status: string; n: number }>(
      "SELECT status, count(*) AS n FROM llm_threads WHERE kind = 'tally' GROUP BY status ORDER BY status",
    );
    expect(ended.map((r) => [r.status, Number(r.n)])).toEqual([
      ['complete', FITS],
      ['failed', ITEMS - FITS],
    ]);
    const refused = await reader.all<{ error_code: string }>("SELECT error_code FROM llm_work_items WHERE status = 'dead_letter'");
    expect(refused.map((r) => r.error_code)).toEqual(Array(ITEMS - FITS).fill('MUTATION_CONFLICT'));
    // Each text applied at most once, and one call per item.
    expect(sim.calls).toHaveLength(ITEMS);
    // The answers raced from several daemons, not one that ran them all (each runs at most 8 at once).
    expect(prompts.reduce((a, b) => a + b)).toBe(ITEMS);
    expect(prompts.filter((n) => n > 0).length).toBeGreaterThan(1);
    expect((await verifyLedger(reader)).ok).toBe(true);
  });
});
