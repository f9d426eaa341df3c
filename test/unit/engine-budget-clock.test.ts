/**
 * Budgets in the engine under an injected clock: a daily budget parks an item until the next UTC
 * midnight and it runs when the clock gets there — not a moment before. Real SQLite file, real
 * simulator over HTTP; waits are on engine events.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig } from '../../src/daemon/config/config.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { estimateCall } from '../../src/domain/budget.js';
import { storyRequest } from '../helpers/operations.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project } from '../helpers/harness.js';

class FakeClock {
  t = Date.parse('2026-01-01T23:00:00Z');
  now = () => this.t;
}

function nextEvent(app: App, match: (e: EngineEvent) => boolean): Promise<EngineEvent> {
  return new Promise((resolve) => {
    const off = app.bus.subscribe((e) => {
      if (match(e)) {
        off();
        resolve(e);
      }
    });
  });
}

describe('daily budget under a fake clock', () => {
  let dir: string;
  let sim: Simulator;
  let app: App;
  const clock = new FakeClock();
  const p = project('p', 2);
  const params = { model: 'test-model', temperature: 0.2, maxTokens: 2048 };
  const perCall = estimateCall(storyRequest(p, p.epics[0]!, params), undefined).tokens;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-budget-'));
    sim = await createSimulator();
    const config = loadConfig(dir, { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });
    // Room for one call's maximum a day: after one real call, the next maximum no longer fits today.
    config.flow.budgets.projects.p = { daily_tokens: perCall + 100 };
    app = new App({ config, logger: createLogger(null, 'silent'), clock, random: () => 0.5 });
    await app.start();
    await app.projects.import(p);
  });
  afterEach(async () => {
    await app.shutdown(0);
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('parks the second call until the next UTC midnight, then runs it', async () => {
    const first = await app.threads.generateEpic('p', 'E1', { force: false, deadlineMs: null, createdBy: null });
    await nextEvent(app, (e) => e.type === 'thread' && e.thread_id === first.thread_id && e.status === 'complete');

    const parked = nextEvent(app, (e) => e.type === 'work_item' && e.error_code === 'BUDGET_EXCEEDED');
    const second = await app.threads.generateEpic('p', 'E2', { force: false, deadlineMs: null, createdBy: null });
    expect(await parked).toMatchObject({ status: 'queued', not_before: Date.parse('2026-01-02T00:00:00Z') });
    expect((await app.threads.get(second.thread_id)).work_items[0]!.error_message).toMatch(/daily_tokens.*resumes at 2026-01-02T00:00:00.000Z/);

    clock.t = Date.parse('2026-01-01T23:59:59.999Z');
    expect(await app.engine.claimDue()).toBe(0);
    expect(sim.calls).toHaveLength(1);

    const done = nextEvent(app, (e) => e.type === 'thread' && e.thread_id === second.thread_id && e.status === 'complete');
    clock.t = Date.parse('2026-01-02T00:00:00Z');
    app.engine.wake();
    await done;
    expect(sim.calls).toHaveLength(2);
    const usage = await app.admin.usage('p');
    expect(usage.rows.map((r) => [r.day, r.calls])).toEqual([
      ['2026-01-02', 1],
      ['2026-01-01', 1],
    ]);
  });
});
