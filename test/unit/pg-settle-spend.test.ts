/**
 * On Postgres the record step's charge settle and the project's spend row ride in one statement of the
 * COMMIT's query (engine/charges.ts `settleAtEnd`, db/charges.ts `settleChargeFromResponse` with `spend`;
 * issue 18 target 9: a statement fewer per paid answer), and the settle's guard stays checked: a charge no
 * longer reserved refuses the statement, and the spend does not move. No settle is left unrun: in a closure
 * of two answers, the first in doubt (it moves no spend) and the second paid, the first's settle rides with
 * the second's spend row and the second's runs alone; a settle whose spend moves by nothing runs alone.
 * Real Postgres, the real writer, the real record step (`recordResponse`).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { StaleStateError } from '../../src/core/errors.js';
import { recordResponse } from '../../src/daemon/engine/completer.js';
import type { EngineHooks } from '../../src/daemon/engine/tx.js';
import { addProjectSpendAtCommit, insertCharge, settleChargeFromResponse } from '../../src/db/charges.js';
import { acquireLock } from '../../src/db/locks.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { simulatedStories } from '../../src/operations/builtin/story_generate_epic/simulate.js';
import { useAnswerClosures } from '../helpers/pg-answer-closures.js';
import { paidAnswerOf } from '../helpers/pg-race.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

const HOOKS: EngineHooks = { threadsEnded: async () => {}, budgeted: () => false };
const DAY = '2026-11-26';

/** Charge `chargeId` of item `id`, reserved at `tokens` and `cost_usd` in project p's spend of `day`. */
const reservation = (id: string, chargeId: string, o: { day?: string; tokens?: number; cost_usd?: number } = {}) => ({
  id: chargeId,
  work_item_id: id,
  thread_id: `t-${id}`,
  project_id: 'p',
  model: 'm',
  attempt: 1,
  repair: 0,
  status: 'reserved',
  day: o.day ?? DAY,
  reserved_tokens: o.tokens ?? 100,
  reserved_cost_usd: o.cost_usd ?? 0.5,
  prompt_tokens: null,
  completion_tokens: null,
  total_tokens: null,
  cost_usd: null,
  response_seq: null,
  created_at: 1,
  settled_at: null,
});

/** A paid answer to epic `epic` whose body says no usage: its charge is settled in doubt, its spend unmoved. */
const answerWithoutUsage = (epic: number) => ({
  ...paidAnswerOf({}),
  bodyText: JSON.stringify({ choices: [{ message: { content: JSON.stringify({ stories: simulatedStories(`E${epic}`, `Epic number ${epic}`) }) } }] }),
});

const storiesOf = (epic: number) => paidAnswerOf({ stories: simulatedStories(`E${epic}`, `Epic number ${epic}`) });

describe("a paid answer's charge settle and its project's spend, on Postgres", () => {
  const c = useAnswerClosures(HOOKS);
  beforeAll(() => insertThread(c.db.reader, { ...testThreadRow('o'), kind: 'story_generate_all', status: 'running' }));

  const spend = async (day = DAY) =>
    (await c.db.reader.get<{ tokens: number; cost_usd: number }>('SELECT tokens, cost_usd FROM llm_project_spend WHERE project_id = ? AND day = ?', [
      'p',
      day,
    ]))!;

  const chargeOf = async (id: string) =>
    (await c.db.reader.get<{ status: string; total_tokens: number | null; response_seq: number | null }>(
      'SELECT status, total_tokens, response_seq FROM llm_charges WHERE id = ?',
      [id],
    ))!;

  /** Item `id` of epic `epic` running under d1's lease, its lock row held, `charge` reserved (and moved into its day's spend). */
  const leasedWithCharge = async (id: string, epic: number, charge: ReturnType<typeof reservation>) => {
    await insertThread(c.db.reader, {
      ...testThreadRow(id),
      kind: 'story_generate_epic',
      status: 'running',
      space_id: 'p',
      parent_thread_id: 't-o',
      input: JSON.stringify({ project_id: 'p', epic_id: `E${epic}` }),
      target_ref: JSON.stringify({ project_id: 'p', doc_type: 'story_backlog', epic_id: `E${epic}` }),
    });
    await insertWorkItem(
      c.db.reader,
      testWorkItemRow(id, { status: 'running', project_id: 'p', lock_scope: `p:${id}`, lease_owner: c.ctx.owner, lease_expires_at: Date.now() + 60_000 }),
    );
    await acquireLock(c.db.reader, { scope: `p:${id}`, owner: id, now: 1, expires_at: null });
    await insertCharge(c.db.reader, charge);
    await addProjectSpendAtCommit(c.db.reader, { project_id: 'p', day: charge.day, tokens: charge.reserved_tokens, cost_usd: charge.reserved_cost_usd });
  };

  it('run as one statement of the record step’s COMMIT query: the charge settled, the spend at the usage', async () => {
    await leasedWithCharge('a', 1, reservation('a', 'c-a'));

    c.record();
    await c.write((tx) => recordResponse(tx, c.ctx, 'a', storiesOf(1)));
    c.stop();

    const commits = c.sent.filter((text) => /\bCOMMIT\b/.test(text));
    expect(commits).toHaveLength(1);
    expect(commits[0]).toMatch(/WITH changed AS \(UPDATE llm_charges[\s\S]*written_along AS \(INSERT INTO llm_project_spend/);
    // No spend upsert and no settle of their own, in the COMMIT's query or before it.
    expect(c.sent.join('\n')).not.toMatch(/(?:^|AS |;\n)INSERT INTO llm_project_spend/m);
    expect(c.count(/^(?:WITH changed AS \()?UPDATE llm_charges/)).toBe(0);
    const charge = await chargeOf('c-a');
    expect(charge.status).toBe('settled');
    expect(Number(charge.total_tokens)).toBe(15);
    expect(charge.response_seq).not.toBeNull();
    // The reservation's 100 tokens moved to the answer's 15; nothing priced: its cost is unknown (0 counted).
    expect(Number((await spend()).tokens)).toBe(15);
  });

  it('settles both answers of a closure whose first is in doubt: its settle rides with the second’s spend row', async () => {
    const day = '2026-11-27';
    await leasedWithCharge('b', 2, reservation('b', 'c-b', { day }));
    await leasedWithCharge('c', 3, reservation('c', 'c-c', { day }));
    expect(Number((await spend(day)).tokens)).toBe(200);

    await c.write(async (tx) => {
      await recordResponse(tx, c.ctx, 'b', answerWithoutUsage(2));
      await recordResponse(tx, c.ctx, 'c', storiesOf(3));
    });

    const b = await chargeOf('c-b');
    expect(b.status).toBe('in_doubt');
    expect(b.response_seq).not.toBeNull();
    const charge = await chargeOf('c-c');
    expect(charge.status).toBe('settled');
    expect(Number(charge.total_tokens)).toBe(15);
    // b stays counted at its maximum (100), c at its usage (15).
    expect(Number((await spend(day)).tokens)).toBe(115);
  });

  it('settles a charge whose spend moves by nothing (its usage its reservation), alone', async () => {
    const day = '2026-11-28';
    await leasedWithCharge('d', 4, reservation('d', 'c-d', { day, tokens: 15, cost_usd: 0 }));

    await c.write((tx) => recordResponse(tx, c.ctx, 'd', storiesOf(4)));

    const charge = await chargeOf('c-d');
    expect(charge.status).toBe('settled');
    expect(Number(charge.total_tokens)).toBe(15);
    expect(charge.response_seq).not.toBeNull();
    const after = await spend(day);
    expect([Number(after.tokens), Number(after.cost_usd)]).toEqual([15, 0]);
  });

  it('refuses a charge no longer reserved, with the spend unmoved', async () => {
    await insertCharge(c.db.reader, { ...reservation('a', 'c-released'), status: 'released', settled_at: 2 });
    const before = await spend();
    const stale = c.write((tx) =>
      settleChargeFromResponse(
        tx.sql,
        {
          id: 'c-released',
          work_item_id: 'a',
          status: 'settled',
          prompt_tokens: 10,
          completion_tokens: 5,
          total_tokens: 15,
          cost_usd: null,
          http_status: 200,
          latency_ms: 5,
          provider_request_id: null,
          now: 3,
        },
        { project_id: 'p', day: DAY, tokens: -85, cost_usd: -0.5 },
      ),
    );
    await expect(stale).rejects.toThrow(StaleStateError);
    await expect(stale).rejects.toThrow(/charge c-released is not reserved/);
    expect(await spend()).toEqual(before);
  });
});
