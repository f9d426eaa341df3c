/**
 * An operation whose `apply` throws: the failure is permanent (MUTATION_CONFLICT, dead_letter), the
 * paid response stays recorded, and recovery never resumes it — under a fake clock moved far past any
 * lease, over recovery intervals. Once the operation is fixed, `replay --apply` rescues the answer
 * without paying again. Real SQLite file, real simulator over HTTP, the real module loader.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig, operationSettingsOf, type DaemonConfig } from '../../src/daemon/config/config.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { loadOperations } from '../../src/operations/loader.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project } from '../helpers/harness.js';

class FakeClock {
  t = Date.parse('2026-01-01T00:00:00Z');
  now = () => this.t;
}

const moduleSource = (apply: string) => `export default {
  name: 'summary_note',
  description: 'A one-line summary of a text',
  input: { type: 'object', properties: { project_id: { type: 'string' }, text: { type: 'string' } }, required: ['project_id', 'text'] },
  identity: (i) => ({ space_type: 'project', space_id: i.project_id, target_doc_type: 'summary', target_id: 'latest' }),
  lockScope: (i) => 'summary:' + i.project_id,
  target: (i) => ({ project_id: i.project_id, doc_type: 'summary' }),
  prompt: ({ input }) => ({ messages: [{ role: 'user', content: 'Summarize: ' + input.text }] }),
  output: { type: 'object', properties: { summary: { type: 'string' } }, required: ['summary'] },
  apply: ${apply},
};`;

function ended(app: App, threadId: string, status: string): Promise<void> {
  return new Promise((resolve) => {
    const off = app.bus.subscribe((e: EngineEvent) => {
      if (e.type === 'thread' && e.thread_id === threadId && e.status === status) {
        off();
        resolve();
      }
    });
  });
}

describe('an apply that throws', () => {
  let dir: string;
  let sim: Simulator;
  let config: DaemonConfig;
  const clock = new FakeClock();
  const apps: App[] = [];

  async function appWith(file: string, apply: string): Promise<App> {
    writeFileSync(join(dir, 'operations', file), moduleSource(apply));
    const operations = await loadOperations(dir, [], operationSettingsOf(config));
    const app = new App({ config, logger: createLogger(config.logPath, 'info'), clock, random: () => 0.5, operations });
    apps.push(app);
    await app.start();
    return app;
  }

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-conflict-'));
    mkdirSync(join(dir, 'operations'));
    sim = await createSimulator();
    config = { ...loadConfig(dir, { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k' }), recoveryIntervalMs: 50 };
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.shutdown(0).catch(() => {});
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('fails MUTATION_CONFLICT once, keeps the paid answer, is never resumed, and replay --apply rescues it after the fix', async () => {
    const broken = await appWith('summary_note.mjs', `() => { throw new Error('cannot merge into this document'); }`);
    await broken.projects.import(project('p', 1));
    const { thread_id } = await broken.threads.run(
      'summary_note',
      { project_id: 'p', text: 'a long text' },
      { force: false, deadlineMs: null, createdBy: null },
    );
    const failed = ended(broken, thread_id, 'failed');
    await failed;

    const entries = await broken.ledger.thread(thread_id);
    expect(entries.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'error']);
    expect(entries[2]!.payload).toMatchObject({ ok: true });
    expect(entries[3]!.payload).toMatchObject({ code: 'MUTATION_CONFLICT', class: 'permanent', next: 'dead_letter' });
    expect(String(entries[3]!.payload.message)).toContain('summary_note.apply: cannot merge into this document');
    expect((await broken.threads.get(thread_id)).work_items).toMatchObject([{ status: 'dead_letter', error_code: 'MUTATION_CONFLICT' }]);

    // Far past every lease, then recovery scans: at start-up (a restart) and on its interval.
    clock.t += 3_600_000;
    await broken.engine.recover(false);
    await broken.engine.recover(false);
    await new Promise((r) => setTimeout(r, 4 * config.recoveryIntervalMs));
    expect(await broken.metrics.text()).not.toMatch(/combine_recoveries_total\{action="resumed"\} [1-9]/);
    expect(sim.calls).toHaveLength(1);
    expect(await broken.ledger.thread(thread_id)).toHaveLength(4);
    await broken.shutdown(0);
    apps.length = 0;

    // The operation is fixed: a restart does not resume the item either, and replay --apply applies the recorded answer.
    rmSync(join(dir, 'operations', 'summary_note.mjs'));
    const fixed = await appWith('summary_note_v2.mjs', `({ answer }) => ({ content: { summary: answer.summary }, summary: { chars: answer.summary.length } })`);
    const rescued = ended(fixed, thread_id, 'complete');
    const report = await fixed.threads.replay(thread_id, { apply: true, responseSeq: null });
    expect(report.replayed).toMatchObject({ ok: true });
    await rescued;
    expect(sim.calls).toHaveLength(1);
    expect(await fixed.projects.document('p', 'summary', null)).toMatchObject({ version: 1, content: { summary: expect.any(String) } });
    const log = readFileSync(config.logPath, 'utf8');
    const resumed = log.split('\n').filter((l) => l.includes('"recovery scan"') && /"resumed":[1-9]/.test(l));
    expect(resumed).toEqual([]);
  });
});
