/**
 * On Postgres a claim round starts the items it claimed whose start sends a call, in its own transaction
 * (engine/claim-starts.ts): one commit per round instead of the claim's and then the start's. When the round
 * returns, those items are `running` with their `prompt` entries, their threads running, their reservations
 * committed: the call is recorded as started and its budget reserved before it is sent. An item whose start
 * makes no call is left claimed, to its own start, which gives its reservation back (and the pipeline its
 * admission). Real Postgres, the real writer, the real claim round and start, generate-all's real rows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { flowControlOf } from '../../src/daemon/config/flow.js';
import { claimRoundInOwnWrite } from '../../src/daemon/engine/claim-starts.js';
import { itemWrites, runLeasedItem, type PipelineDeps } from '../../src/daemon/engine/item-pipeline.js';
import { ANSWER_SLOTS, START_SLICE, StartSlots } from '../../src/daemon/engine/start-slots.js';
import { EngineSpans } from '../../src/daemon/tracing/engine-spans.js';
import { noTracer } from '../../src/daemon/tracing/tracer.js';
import { claimWorkItems, type FlowControl } from '../../src/daemon/engine/producer.js';
import type { Write } from '../../src/daemon/engine/tx.js';
import { importProject } from '../../src/daemon/services/commands.js';
import { submitOperation } from '../../src/daemon/services/submit.js';
import { createModelRouter } from '../../src/daemon/routing/wiring.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { loadOperations } from '../../src/operations/loader.js';
import { project } from '../helpers/harness.js';
import { openRaceDatabase, testEngineContext, type RaceDatabase } from '../helpers/pg-race.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
let home: string;
let flow: FlowControl;
beforeEach(async () => {
  db = await openRaceDatabase();
  home = mkdtempSync(join(tmpdir(), 'cmb-claim-starts-'));
  // Two requests a minute: a round of two items takes both.
  const env = { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model', COMBINE_REQUESTS_PER_MINUTE: '2' };
  const config = loadConfig(home, env);
  flow = flowControlOf(config.flow, await loadOperations(home, [], operationSettingsOf(config)), createModelRouter(config, undefined));
});
afterEach(async () => {
  rmSync(home, { recursive: true, force: true });
  await db?.drop();
});

const ctx = () => testEngineContext('d1', flow.operations);

/** generate-all over project `p`'s `epics` epics: an open orchestration, a queued child item per epic. */
async function generateAll(epics: number): Promise<void> {
  await db.write((tx) => importProject(tx, project('p', epics)));
  const options = { force: false, maxQueued: 10_000, deadlineAt: null, createdBy: null, traceparent: null };
  await db.write((tx) => submitOperation(tx, flow.operations, 'story_generate_all', { project_id: 'p' }, options));
}

/** One claim round of up to 8 items by daemon d1 (claim-starts.ts), its writes counted. */
async function round() {
  let writes = 0;
  const counted: Write = (fn) => {
    writes++;
    return db.write(fn);
  };
  const started = await claimRoundInOwnWrite(counted, systemClock, ctx(), 'postgres', (tx, admissions) =>
    claimWorkItems(tx, flow, 'd1', 8, 60_000, admissions),
  );
  return { ...started, writes };
}

/** What the engine's item pipeline runs on (engine.ts), for d1: no call of these tests' reaches a provider. */
const pipeline = (): PipelineDeps => ({
  ctx: ctx(),
  router: flow.router,
  clock: systemClock,
  spans: new EngineSpans(noTracer),
  write: (fn) => db.write(fn),
  call: { timeoutMs: 1_000, secrets: [], maxProviderWaitMs: undefined },
  stopped: () => false,
  startSlots: new StartSlots(START_SLICE),
  writes: itemWrites(db.write, ctx(), 'postgres'),
  answerSlots: new StartSlots(ANSWER_SLOTS),
  onOutcome: () => {},
});

/** The item's status, its thread's, its ledger entries' types and its charges' statuses. */
async function stateOf(itemId: string) {
  const row = await db.reader.get<{ status: string; thread_status: string; parent_status: string | null }>(
    `SELECT w.status, t.status AS thread_status, o.status AS parent_status
     FROM llm_work_items w JOIN llm_threads t ON t.id = w.thread_id LEFT JOIN llm_threads o ON o.id = t.parent_thread_id WHERE w.id = ?`,
    [itemId],
  );
  const entries = await db.reader.all<{ entry_type: string }>('SELECT entry_type FROM llm_ledger_entries WHERE work_item_id = ? ORDER BY seq', [itemId]);
  const charges = await db.reader.all<{ status: string }>('SELECT status FROM llm_charges WHERE work_item_id = ?', [itemId]);
  return { ...row, entries: entries.map((e) => e.entry_type), charges: charges.map((c) => c.status) };
}

describe('a claim round starts its items that send a call, in its own transaction (Postgres)', () => {
  it("one write: the items are running with their prompts and reservations when it returns, each call's request the one recorded", async () => {
    await generateAll(2);
    const r = await round();
    expect(r.writes).toBe(1);
    expect(r.round.claimed).toHaveLength(2);
    expect(r.calls.size).toBe(2);
    for (const c of r.round.claimed) {
      expect(await stateOf(c.item.id)).toEqual({
        status: 'running',
        thread_status: 'running',
        parent_status: 'running',
        entries: ['prompt'],
        charges: ['reserved'],
      });
      const call = r.calls.get(c.item.id)!;
      expect(call.kind).toBe('call');
      expect(call.request).toEqual(c.request?.request);
    }
  });

  it('an item whose start makes no call is left claimed with its reservation and admission; its own start then gives both back', async () => {
    await generateAll(1);
    // Kind `k`: no operation builds its request, so its start fails it without a call.
    await insertThread(db.reader, testThreadRow('x'));
    await insertWorkItem(db.reader, testWorkItemRow('x', { not_before: 1 }));
    const r = await round();
    expect(r.writes).toBe(1);
    expect(r.round.claimed.map((c) => c.item.id).sort()).toEqual(['x', expect.any(String)].sort());
    const sent = r.round.claimed.find((c) => c.item.id !== 'x')!;
    expect(r.calls.has(sent.item.id)).toBe(true);
    expect((await stateOf(sent.item.id)).status).toBe('running');
    // Not started with the claim: still claimed, its reservation committed, its admission still the item's.
    expect(r.calls.has('x')).toBe(false);
    expect(await stateOf('x')).toMatchObject({ status: 'claimed', entries: [], charges: ['reserved'] });
    expect(r.round.claimed.find((c) => c.item.id === 'x')!.admission).toBeDefined();
    // The round took both of the minute's requests.
    const route = flow.router.defaultRoute.key;
    expect(flow.limiter.admit(route, 1, Date.now()).ok).toBe(false);
    // Its own start, as the engine runs it, makes no call: what the claim reserved and admitted is free again.
    await runLeasedItem(pipeline(), {
      item: { id: 'x', thread_id: 't-x' },
      cancel: { controller: new AbortController(), canceledByUser: false },
      resumeFrom: null,
      log: () => pino({ level: 'silent' }),
      claimAdmission: r.round.claimed.find((c) => c.item.id === 'x')!.admission,
      traceparent: null,
      claimedRequest: null,
      startedWithClaim: null,
    });
    expect(await stateOf('x')).toMatchObject({ status: 'dead_letter', charges: ['released'] });
    expect(flow.limiter.admit(route, 1, Date.now()).ok).toBe(true);
  });
});
