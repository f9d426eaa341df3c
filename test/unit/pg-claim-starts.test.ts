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
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { flowControlOf } from '../../src/daemon/config/flow.js';
import { claimRoundInOwnWrite } from '../../src/daemon/engine/claim-starts.js';
import { itemWrites } from '../../src/daemon/engine/item-pipeline.js';
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
  const config = loadConfig(home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });
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
    await generateAll(3);
    const r = await round();
    expect(r.writes).toBe(1);
    expect(r.round.claimed).toHaveLength(3);
    expect(r.calls.size).toBe(3);
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

  it('an item whose start makes no call is left claimed with its reservation; its own start then gives the reservation back', async () => {
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
    // Its own start (as the pipeline runs it) makes no call and releases what the claim reserved.
    expect(await itemWrites(db.write, ctx(), 'postgres').start({ itemId: 'x', claimed: null })).toBeNull();
    expect((await stateOf('x')).charges).toEqual(['released']);
  });
});
