/**
 * The refusals only Postgres makes (refused-values.test.ts has the cases both backends share): a value
 * refused by a path no check knows, made real by a trigger that raises the SQLSTATE the server raises for
 * a value it cannot take (SQLite's triggers raise a constraint error, not a refused value). The item ends,
 * charged once, never re-sent; its batch's other items apply (inside one shared closure of answers too:
 * pinned there by a held answer's closure ahead of them); a refused rescue does not hold up the others.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type CommandJson, type Harness, project, waitUntil } from '../helpers/harness.js';
import { writesWaitingFor } from '../helpers/pg-race.js';
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

  // Inside one shared closure of answers: p's, q's, r's and s's answers come back together while another
  // answer's closure (z's, held by a lock on z's backlog) is in flight, so all four finishes are asked before
  // the next closure runs and share it. p's parts are refused there (counted by the trigger in a sequence,
  // which a rollback does not undo): the closure rolls back whole, and each answer's step runs again alone.
  it('one answer of a shared closure refused (Postgres): only that item VALUE_REFUSED; the others applied once, charged once, one call each', async () => {
    await t.setup(undefined, { faults: [{ kind: 'hold', match: 'Outline of' }] });
    await t.h.importProject(project('z', 1));
    await t.h.edit(async (sql) => {
      await sql.run('CREATE SEQUENCE refusals');
      await sql.run(`CREATE FUNCTION refuse_document_parts() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          IF NEW.part_key LIKE 'refused:%' THEN PERFORM nextval('refusals'); RAISE EXCEPTION 'part key refused by the test' USING ERRCODE = '22001'; END IF;
          RETURN NEW; END $$`);
      await sql.run('CREATE TRIGGER refuse_document_parts BEFORE INSERT OR UPDATE ON document_parts FOR EACH ROW EXECUTE FUNCTION refuse_document_parts()');
    });
    const zBacklog = await holdRow(t.h, "SELECT 1 FROM documents WHERE project_id = 'z' AND doc_type = 'story_backlog' FOR UPDATE");
    await t.h.json(['run', 'story_generate_epic', '--input', JSON.stringify({ project_id: 'z', epic_id: 'E1' })]);
    let runs: Awaited<ReturnType<typeof t.submitAll>>;
    try {
      runs = await t.submitAll('refused');
      // z's answer's closure waits for its backlog; the four outline calls are held until then.
      await waitUntil(async () => ((await t.h.edit((sql) => writesWaitingFor(sql, zBacklog.pid))) === 1 ? true : null), "z's answer to wait for its backlog");
      await waitUntil(() => (t.h.sim.calls.filter((c) => c.fault === 'hold').length === PROJECTS.length ? true : null), 'the four outline calls');
      t.h.sim.release();
      // Each answer's finish is asked as soon as its response is recorded, so all four wait behind z's closure.
      // Recorded is not asked: a finish asked after the release below runs alone, and the refusals' count at the
      // end (2: once in the shared closure, once alone) fails the test rather than letting it pass on a weaker case.
      const recorded =
        "SELECT count(*)::int AS n FROM llm_ledger_entries e JOIN llm_threads t ON t.id = e.thread_id WHERE t.kind = 'outline' AND e.entry_type = 'response'";
      await waitUntil(async () => ((await t.h.queryOne<{ n: number }>(recorded))!.n === PROJECTS.length ? true : null), 'the four answers recorded');
    } finally {
      await zBacklog.release();
    }
    const ended = await t.ends(runs);
    expect(ended.items.get('p')).toMatchObject({ status: 'dead_letter', error_code: 'VALUE_REFUSED' });
    expect(ended.threads.get('p')).toMatchObject({ status: 'failed', usage: { calls: 1 } });
    expect((await t.ledgerTypes('p')).map((e) => e.entry_type)).toEqual(['prompt', 'response', 'error']);
    for (const id of PROJECTS.slice(1)) {
      expect((await t.ledgerTypes(id)).map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);
    }
    // One charge per call, each settled once: p's answer was paid and recorded; only its application was refused.
    const charges = await t.h.query<{ project_id: string; status: string }>('SELECT project_id, status FROM llm_charges ORDER BY project_id');
    expect(charges.map((c) => [c.project_id, c.status])).toEqual([...PROJECTS, 'z'].map((id) => [id, 'settled']));
    expect(await t.h.query("SELECT status FROM llm_threads WHERE kind = 'story_generate_epic'")).toEqual([{ status: 'complete' }]);
    await t.expectOthersAppliedAndHealthy(ended, PROJECTS.length + 1);
    // The case is the one named: p's parts were refused twice, in the closure it shared, then in its step alone
    // (an answer alone from the start is refused once).
    expect(await t.h.queryOne('SELECT last_value FROM refusals')).toEqual({ last_value: 2 });
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

/** A row locked by another session of the daemon's database until `release`: its backend's pid, to see who waits for it. */
async function holdRow(h: Harness, select: string): Promise<{ pid: number; release: () => Promise<void> }> {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let locked!: (pid: number) => void;
  const pid = new Promise<number>((r) => (locked = r));
  const held = h.edit(async (sql) => {
    await sql.run('BEGIN');
    await sql.get(select);
    locked((await sql.get<{ pid: number }>('SELECT pg_backend_pid() AS pid'))!.pid);
    await released;
    await sql.run('ROLLBACK');
  });
  return {
    pid: await Promise.race([pid, held.then(() => Promise.reject(new Error('the row was not held')))]),
    release: async () => {
      release();
      await held;
    },
  };
}
