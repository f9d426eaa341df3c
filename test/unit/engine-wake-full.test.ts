/**
 * Another daemon's `freed` notification (runtime/cluster-changes.ts) wakes a producer only when a look
 * could claim something: queued work, and a free slot. With every slot taken, its own next free slot
 * wakes it. Counted through `combine_limiter_waits_total{reason="slots_full"}`: each look that finds due
 * work and no free slot adds one. Real SQLite file (the engine is the same on both backends), real
 * simulator over HTTP holding every call open.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { App } from '../../src/daemon/app.js';
import { loadConfig, type DaemonConfig } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { createSimulator, type Simulator } from '../../src/sim/simulator.js';
import { project } from '../helpers/harness.js';

async function slotsFullWaits(app: App): Promise<number> {
  const m = /combine_limiter_waits_total\{reason="slots_full"\} (\d+)/.exec(await app.metrics.text());
  return Number(m?.[1] ?? 0);
}

/** Lets a look the engine scheduled (setImmediate) begin, then waits for it and runs one more (`claimDue`). */
async function afterScheduledLook(app: App): Promise<void> {
  await new Promise((r) => setImmediate(r));
  await app.engine.claimDue();
}

describe("a 'freed' notification with every slot taken", () => {
  let dir: string;
  let sim: Simulator;
  let config: DaemonConfig;
  let app: App;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-wake-full-'));
    sim = await createSimulator({ faults: [{ kind: 'hang' }] });
    config = { ...loadConfig(dir, { OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' }), maxInFlight: 1 };
    app = new App({ config, logger: createLogger(null, 'silent') });
  });
  afterEach(async () => {
    await app.shutdown(0);
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('does not wake the producer: no look, no transaction, until a slot frees', async () => {
    await app.start();
    await app.projects.import(project('p', 2));
    await app.threads.generateAll('p', { force: false, deadlineMs: null, createdBy: null });
    // One item holds the one slot (its call hangs); the other stays queued and due.
    while (sim.calls.length < 1) await new Promise((r) => setTimeout(r, 10));
    await app.engine.claimDue();
    expect(app.engine.inFlightCount).toBe(1);

    // A look with the slot taken counts one wait: the check that the count below means looks.
    const before = await slotsFullWaits(app);
    app.engine.wake();
    await afterScheduledLook(app);
    expect(await slotsFullWaits(app)).toBe(before + 2);

    // The same with 'freed' instead: only claimDue's own look counts.
    app.engine.wakeIfWorkQueued();
    await afterScheduledLook(app);
    expect(await slotsFullWaits(app)).toBe(before + 3);
  });
});
