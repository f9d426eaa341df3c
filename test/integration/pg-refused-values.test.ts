/**
 * The refusals only Postgres makes (refused-values.test.ts has the cases both backends share): a value
 * refused by a path no check knows, made real by a trigger that raises the SQLSTATE the server raises for
 * a value it cannot take (SQLite's triggers raise a constraint error, not a refused value). The item ends,
 * charged once, never re-sent; its batch's other items apply; a refused rescue does not hold up the others.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type CommandJson, waitUntil } from '../helpers/harness.js';
import { PROJECTS, RefusalRuns } from '../helpers/refusals.js';

const t = new RefusalRuns();
afterEach(() => t.cleanup());

describe('a value storage refuses, as only Postgres does', () => {
  // A refusal by a path no check knows, made real: the database refuses one part key (a trigger raising a
  // data exception, 22001 a value too long, as Postgres does for a value it cannot take). Postgres only: SQLite's triggers
  // raise a constraint error, not a refused value.
  it('by a path no check knows (Postgres): that item dead-lettered VALUE_REFUSED, charged once, the response kept; the rest apply', async () => {
    const refusal = { when: "NEW.part_key LIKE 'refused:%'", code: '22001', message: 'part key refused by the test' };
    const ended = await t.runRefusing('document_parts', 'INSERT OR UPDATE', refusal, 'refused');
    expect(ended.threads.get('p')).toMatchObject({ status: 'failed', usage: { calls: 1 } });
    expect(ended.items.get('p')).toEqual({
      status: 'dead_letter',
      error_code: 'VALUE_REFUSED',
      error_message: 'the answer could not be applied: storage refused a value: part key refused by the test (22001)',
    });
    const ledger = await t.ledgerTypes('p');
    // The answer's application rolled back (its parse_report with it); the paid response stays, for `replay --apply`.
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'error']);
    expect(ledger[2]!.payload).toMatchObject({ code: 'VALUE_REFUSED', class: 'permanent', next: 'dead_letter' });
    // Nothing of p's refused apply is stored: no document, no part.
    expect(await t.h.cli(['doc', 'p', 'outline'])).toMatchObject({ code: 2 });
    expect(await t.h.query("SELECT part_key FROM document_parts WHERE part_key LIKE 'refused:%'")).toEqual([]);
    // Logged at error, with the SQLSTATE and the server's own error kept (the cause).
    const logged = t.h
      .logText()
      .split('\n')
      .find((line) => line.includes("storage refused a value of the item's finish write"));
    expect(JSON.parse(logged!)).toMatchObject({
      level: 'error',
      sqlstate: '22001',
      step: 'finish',
      err: { type: 'RefusedValueError', stack: expect.stringContaining('caused by: error: part key refused by the test') },
    });
    await t.expectOthersAppliedAndHealthy(ended);
  });

  // The record write refused (the reviewer's case): the settle of p's charge raises 22003. On main the item
  // was left running and recovery sent its call again (dead_letter INTERRUPTED after re-sends).
  it('a refused record write (Postgres): dead_letter VALUE_REFUSED, the charge closed in_doubt, one call; the rest apply', async () => {
    const refusal = { when: "NEW.project_id = 'p' AND NEW.status = 'settled'", code: '22003', message: 'charge refused by the test' };
    const ended = await t.runRefusing('llm_charges', 'UPDATE', refusal, 'ok');
    expect(ended.items.get('p')).toMatchObject({ status: 'dead_letter', error_code: 'VALUE_REFUSED' });
    expect(ended.items.get('p')!.error_message).toContain('the answer could not be recorded');
    expect(ended.threads.get('p')).toMatchObject({ status: 'failed', usage: { calls: 1 } });
    const charges = await t.h.query<{ project_id: string; status: string }>('SELECT project_id, status FROM llm_charges ORDER BY project_id');
    expect(charges.map((c) => [c.project_id, c.status])).toEqual([
      ['p', 'in_doubt'],
      ['q', 'settled'],
      ['r', 'settled'],
      ['s', 'settled'],
    ]);
    await t.expectOthersAppliedAndHealthy(ended);
  });

  // The record write refused (p's charge settle), then its ending write meets storage trouble (53100, disk
  // full, while `fault` holds a row): the end is retried until storage takes it, never left `running` for
  // recovery to send again (on the branch before the mend: the end was tried once, p stayed running).
  it('a refused record whose end meets storage trouble (Postgres): the end retried until stored, p dead-lettered, one call', async () => {
    await t.setup();
    await t.h.edit(async (sql) => {
      await sql.run('CREATE TABLE fault (on_ boolean)');
      await sql.run('INSERT INTO fault VALUES (true)');
    });
    await t.refuseRows('llm_charges', 'UPDATE', [
      { when: "NEW.project_id = 'p' AND NEW.status = 'settled'", code: '22003', message: 'charge refused by the test' },
      { when: "NEW.project_id = 'p' AND EXISTS (SELECT 1 FROM fault)", code: '53100', message: 'disk full, says the test' },
    ]);
    const ended = t.runAll('ok');
    await waitUntil(async () => (t.h.logText().includes('disk full, says the test') ? true : null), 'the end to meet the fault', 20_000);
    await t.h.edit(async (sql) => await sql.run('DELETE FROM fault'));
    const { items, threads } = await ended;
    expect(items.get('p')).toMatchObject({ status: 'dead_letter', error_code: 'VALUE_REFUSED' });
    expect(items.get('p')!.error_message).toContain('the answer could not be recorded: storage refused a value: charge refused by the test (22003)');
    expect(threads.get('p')).toMatchObject({ status: 'failed', usage: { calls: 1 } });
    for (const id of PROJECTS.slice(1)) expect(items.get(id)).toMatchObject({ status: 'applied' });
    expect(t.h.sim.calls.length).toBe(PROJECTS.length);
    expect(JSON.parse((await t.h.cli(['health', '--json'])).stdout)).toMatchObject({ ready: true });
    expect(await t.h.json(['ledger', 'verify'])).toMatchObject({ ok: true });
  });

  // Any update of p's charge refused: p's record is refused and so is its end, so p stays running (no
  // re-send). q's call hangs when the daemon is killed. The restart's recovery scan holds both: p's rescue
  // is refused every time; before the mend it rolled back the whole scan, and q was never rescued.
  it('an item whose rescue storage refuses every time (Postgres): the other expired leases are still rescued', async () => {
    await t.setup(undefined, { faults: [{ kind: 'hang', match: 'Outline of Project q', times: 1 }] });
    await t.refuseRows('llm_charges', 'UPDATE', [{ when: "NEW.project_id = 'p'", code: '22003', message: 'charge refused by the test' }]);
    await Promise.all(PROJECTS.map((id) => t.h.json<CommandJson>(['run', 'outline', '--input', JSON.stringify({ project_id: id, mode: 'ok' })])));
    const status = async (id: string) =>
      (
        await t.h.query<{ status: string }>('SELECT w.status FROM llm_work_items w JOIN llm_threads t ON t.id = w.thread_id WHERE t.target_ref LIKE ?', [
          `%"${id}"%`,
        ])
      )[0]?.status;
    await waitUntil(
      async () =>
        (await status('r')) === 'applied' && (await status('s')) === 'applied' && t.h.logText().includes('charge refused by the test') ? true : null,
      'r and s applied, p refused',
      20_000,
    );
    await t.h.killDaemon();
    await t.h.startDaemon();
    await waitUntil(async () => ((await status('q')) === 'applied' ? true : null), 'q rescued and applied', 20_000);
    expect(t.h.logText()).toContain('recovery scan failed; rescuing its items one by one');
    expect(await status('p')).toBe('running');
    // p's call was sent once (never again: its rescue is refused); q's twice (the hung call, then its retry).
    expect(t.h.sim.calls.length).toBe(PROJECTS.length + 1);
  });
});
