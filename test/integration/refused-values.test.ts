/**
 * A value storage refuses fails that one item, not the daemon, the same on both backends (issue 18).
 * Postgres refuses what SQLite stores — a U+0000 in text, a number out of its column's range — and such a
 * write fails the same way every time it runs. So what an operation's code or a provider puts in front of
 * storage is checked where it comes in (operations/runtime.ts, domain/completion.ts), and a refusal by a
 * path no check knows is that item's permanent error (db/errors.ts `refusedValueOf`, engine/failures.ts
 * `failRefusedWrite`): the item ends, charged once, its batch's other items apply, and health stays ready.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type AnswerProxy, startAnswerProxy } from '../helpers/answer-proxy.js';
import { installOutlineOperation } from '../helpers/operations.js';
import { FAST_RETRY, Harness, project, TEST_BACKEND, waitUntil, type CommandJson } from '../helpers/harness.js';

let h: Harness;
let proxy: AnswerProxy | undefined;
afterEach(async () => {
  await Promise.all([h?.cleanup(), proxy?.close()]);
  proxy = undefined;
});

const PROJECTS = ['p', 'q', 'r', 's'];

/** A daemon with the outline operation (its apply's `mode`: helpers/operations.ts) and four projects; `edit` rewrites each 200 body of a prompt (through a proxy). */
async function setup(edit?: (body: any, request: string) => void, sim: Parameters<typeof Harness.start>[0] = {}): Promise<void> {
  h = await Harness.start(sim);
  installOutlineOperation(h.home);
  h.writeConfig(FAST_RETRY);
  await h.stopDaemon();
  if (edit) {
    proxy = await startAnswerProxy(h.sim.url, edit);
    h.env.OPENAI_BASE_URL = proxy.url;
  }
  await h.startDaemon();
  for (const id of PROJECTS) await h.importProject(project(id, 1));
}

interface Ended {
  threads: Map<string, { status: string; usage: { calls: number } }>;
  items: Map<string, { status: string; error_code: string | null; error_message: string | null }>;
}

/**
 * One outline run per project at once (their answers come back together and share a write), `mode` for
 * project p and `ok` for the others; their threads once all ended, by project. Times out with what stayed
 * open: on main, the refused item stays `running` (its write retried as storage trouble, or every round).
 */
async function runAll(mode: string): Promise<Ended> {
  const runs = await Promise.all(
    PROJECTS.map((id) => h.json<CommandJson>(['run', 'outline', '--input', JSON.stringify({ project_id: id, mode: id === 'p' ? mode : 'ok' })])),
  );
  await waitUntil(
    async () => {
      const open = await h.query("SELECT id FROM llm_threads WHERE status IN ('open', 'running')");
      return open.length === 0 ? true : null;
    },
    'every thread to end',
    20_000,
  ).catch(async (e) => {
    const items = await h.query('SELECT thread_id, status, attempt, error_code FROM llm_work_items');
    throw new Error(`${(e as Error).message}; items ${JSON.stringify(items)}; provider calls ${h.sim.calls.length}`);
  });
  const threads = new Map<string, { status: string; usage: { calls: number } }>();
  const items = new Map<string, { status: string; error_code: string | null; error_message: string | null }>();
  for (const [i, id] of PROJECTS.entries()) {
    threads.set(id, await h.waitForEnd(runs[i]!.thread_id));
    const [item] = await h.query<{ status: string; error_code: string | null; error_message: string | null }>(
      'SELECT status, error_code, error_message FROM llm_work_items WHERE thread_id = ?',
      [runs[i]!.thread_id],
    );
    items.set(id, item!);
  }
  return { threads, items };
}

/** What holds whatever the case: the other projects' items applied, one call each, health ready, the ledger verifies. */
async function expectOthersAppliedAndHealthy(ended: Ended): Promise<void> {
  for (const id of PROJECTS.slice(1)) {
    expect(ended.items.get(id)).toMatchObject({ status: 'applied' });
    expect(ended.threads.get(id)).toMatchObject({ status: 'complete', usage: { calls: 1 } });
  }
  expect(h.sim.calls.length).toBe(PROJECTS.length);
  const health = JSON.parse((await h.cli(['health', '--json'])).stdout);
  expect(health).toMatchObject({ ready: true, status: 'ready' });
  expect(h.logText()).not.toContain('storage failure');
  expect(await h.json(['ledger', 'verify'])).toMatchObject({ ok: true, first_break: null, incomplete: [] });
}

async function ledgerTypes(project: string): Promise<{ entry_type: string; payload: any }[]> {
  const [t] = await h.query<{ id: string }>("SELECT id FROM llm_threads WHERE target_ref LIKE ? AND kind = 'outline'", [`%"${project}"%`]);
  return await h.json<any[]>(['ledger', t!.id]);
}

/**
 * A refusal by a path no check knows, made real (Postgres): a trigger on `table` (BEFORE `events`) that
 * raises each refusal's SQLSTATE, the first whose condition on NEW holds, as the server does for a value it cannot take.
 */
async function refuseRows(table: string, events: string, refusals: { when: string; code: string; message: string }[]): Promise<void> {
  const checks = refusals.map((r) => `IF ${r.when} THEN RAISE EXCEPTION '${r.message}' USING ERRCODE = '${r.code}'; END IF;`).join('\n');
  await h.edit(async (sql) => {
    await sql.run(`CREATE FUNCTION refuse_${table}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${checks} RETURN NEW; END $$`);
    await sql.run(`CREATE TRIGGER refuse_${table} BEFORE ${events} ON ${table} FOR EACH ROW EXECUTE FUNCTION refuse_${table}()`);
  });
}

/** `runAll(mode)` on a new daemon whose database refuses what `refusal` says (`refuseRows`). */
async function runRefusing(table: string, events: string, refusal: { when: string; code: string; message: string }, mode: string): Promise<Ended> {
  await setup();
  await refuseRows(table, events, [refusal]);
  return await runAll(mode);
}

describe('a value storage refuses', () => {
  it("a NUL that an operation's apply puts in a document part's key: dead-lettered naming the field, charged once; the rest apply", async () => {
    await setup();
    const ended = await runAll('nul');
    expect(ended.threads.get('p')).toMatchObject({ status: 'failed', usage: { calls: 1 } });
    expect(ended.items.get('p')).toMatchObject({ status: 'dead_letter', error_code: 'MUTATION_CONFLICT' });
    const message = ended.items.get('p')!.error_message!;
    expect(message).toContain('outline.apply: content sections[0].name holds the character U+0000 (NUL)');
    expect(message).not.toContain('\u0000');
    const ledger = await ledgerTypes('p');
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'error']);
    expect(ledger[3]!.payload).toMatchObject({ code: 'MUTATION_CONFLICT', class: 'permanent', next: 'dead_letter' });
    expect(await h.cli(['doc', 'p', 'outline'])).toMatchObject({ code: 2 });
    await expectOthersAppliedAndHealthy(ended);
  });

  it("a provider's usage no token column holds (3e9 tokens): the answer applied with its usage unknown, charged once", async () => {
    await setup((body, request) => {
      if (request.includes('Outline of Project p')) body.usage.prompt_tokens = 3e9;
      if (request.includes('Outline of Project q')) body.usage.completion_tokens = 1.5;
    });
    const ended = await runAll('ok');
    expect(ended.items.get('p')).toMatchObject({ status: 'applied' });
    expect(ended.threads.get('p')).toMatchObject({ status: 'complete', usage: { calls: 1 } });
    const charges = await h.query<{ project_id: string; status: string; prompt_tokens: number | null }>(
      'SELECT project_id, status, prompt_tokens FROM llm_charges ORDER BY project_id',
    );
    expect(charges.map((c) => [c.project_id, c.status, c.prompt_tokens === null])).toEqual([
      ['p', 'in_doubt', true],
      ['q', 'in_doubt', true],
      ['r', 'settled', false],
      ['s', 'settled', false],
    ]);
    // The body is kept as received: its usage too.
    expect((await ledgerTypes('p'))[1]!.payload.body.usage.prompt_tokens).toBe(3e9);
    await expectOthersAppliedAndHealthy(ended);
  });

  // A refusal by a path no check knows, made real: the database refuses one part key (a trigger raising a
  // data exception, 22001 a value too long, as Postgres does for a value it cannot take). Postgres only: SQLite's triggers
  // raise a constraint error, not a refused value.
  it.runIf(TEST_BACKEND === 'postgres')(
    'by a path no check knows (Postgres): that item dead-lettered VALUE_REFUSED, charged once, the response kept; the rest apply',
    async () => {
      const refusal = { when: "NEW.part_key LIKE 'refused:%'", code: '22001', message: 'part key refused by the test' };
      const ended = await runRefusing('document_parts', 'INSERT OR UPDATE', refusal, 'refused');
      expect(ended.threads.get('p')).toMatchObject({ status: 'failed', usage: { calls: 1 } });
      expect(ended.items.get('p')).toEqual({
        status: 'dead_letter',
        error_code: 'VALUE_REFUSED',
        error_message: 'the answer could not be applied: storage refused a value: part key refused by the test (22001)',
      });
      const ledger = await ledgerTypes('p');
      // The answer's application rolled back (its parse_report with it); the paid response stays, for `replay --apply`.
      expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'error']);
      expect(ledger[2]!.payload).toMatchObject({ code: 'VALUE_REFUSED', class: 'permanent', next: 'dead_letter' });
      // Logged at error, with the SQLSTATE and the server's own error kept (the cause).
      const logged = h
        .logText()
        .split('\n')
        .find((line) => line.includes("storage refused a value of the item's finish write"));
      expect(JSON.parse(logged!)).toMatchObject({
        level: 'error',
        sqlstate: '22001',
        step: 'finish',
        err: { type: 'RefusedValueError', stack: expect.stringContaining('caused by: error: part key refused by the test') },
      });
      await expectOthersAppliedAndHealthy(ended);
    },
  );

  // The record write refused (the reviewer's case): the settle of p's charge raises 22003. On main the item
  // was left running and recovery sent its call again (dead_letter INTERRUPTED after re-sends).
  it.runIf(TEST_BACKEND === 'postgres')(
    'a refused record write (Postgres): dead_letter VALUE_REFUSED, the charge closed in_doubt, one call; the rest apply',
    async () => {
      const refusal = { when: "NEW.project_id = 'p' AND NEW.status = 'settled'", code: '22003', message: 'charge refused by the test' };
      const ended = await runRefusing('llm_charges', 'UPDATE', refusal, 'ok');
      expect(ended.items.get('p')).toMatchObject({ status: 'dead_letter', error_code: 'VALUE_REFUSED' });
      expect(ended.items.get('p')!.error_message).toContain('the answer could not be recorded');
      expect(ended.threads.get('p')).toMatchObject({ status: 'failed', usage: { calls: 1 } });
      const charges = await h.query<{ project_id: string; status: string }>('SELECT project_id, status FROM llm_charges ORDER BY project_id');
      expect(charges.map((c) => [c.project_id, c.status])).toEqual([
        ['p', 'in_doubt'],
        ['q', 'settled'],
        ['r', 'settled'],
        ['s', 'settled'],
      ]);
      await expectOthersAppliedAndHealthy(ended);
    },
  );

  // The record write refused (p's charge settle), then its ending write meets storage trouble (53100, disk
  // full, while `fault` holds a row): the end is retried until storage takes it, never left `running` for
  // recovery to send again (on the branch before the mend: the end was tried once, p stayed running).
  it.runIf(TEST_BACKEND === 'postgres')(
    'a refused record whose end meets storage trouble (Postgres): the end retried until stored, p dead-lettered, one call',
    async () => {
      await setup();
      await h.edit(async (sql) => {
        await sql.run('CREATE TABLE fault (on_ boolean)');
        await sql.run('INSERT INTO fault VALUES (true)');
      });
      await refuseRows('llm_charges', 'UPDATE', [
        { when: "NEW.project_id = 'p' AND NEW.status = 'settled'", code: '22003', message: 'charge refused by the test' },
        { when: "NEW.project_id = 'p' AND EXISTS (SELECT 1 FROM fault)", code: '53100', message: 'disk full, says the test' },
      ]);
      const ended = runAll('ok');
      await waitUntil(async () => (h.logText().includes('disk full, says the test') ? true : null), 'the end to meet the fault', 20_000);
      await h.edit(async (sql) => await sql.run('DELETE FROM fault'));
      const { items, threads } = await ended;
      expect(items.get('p')).toMatchObject({ status: 'dead_letter', error_code: 'VALUE_REFUSED' });
      expect(items.get('p')!.error_message).toContain('the answer could not be recorded: storage refused a value: charge refused by the test (22003)');
      expect(threads.get('p')).toMatchObject({ status: 'failed', usage: { calls: 1 } });
      for (const id of PROJECTS.slice(1)) expect(items.get(id)).toMatchObject({ status: 'applied' });
      expect(h.sim.calls.length).toBe(PROJECTS.length);
      expect(JSON.parse((await h.cli(['health', '--json'])).stdout)).toMatchObject({ ready: true });
      expect(await h.json(['ledger', 'verify'])).toMatchObject({ ok: true });
    },
  );

  // Any update of p's charge refused: p's record is refused and so is its end, so p stays running (no
  // re-send). q's call hangs when the daemon is killed. The restart's recovery scan holds both: p's rescue
  // is refused every time; before the mend it rolled back the whole scan, and q was never rescued.
  it.runIf(TEST_BACKEND === 'postgres')('an item whose rescue storage refuses every time (Postgres): the other expired leases are still rescued', async () => {
    await setup(undefined, { faults: [{ kind: 'hang', match: 'Outline of Project q', times: 1 }] });
    await refuseRows('llm_charges', 'UPDATE', [{ when: "NEW.project_id = 'p'", code: '22003', message: 'charge refused by the test' }]);
    await Promise.all(PROJECTS.map((id) => h.json<CommandJson>(['run', 'outline', '--input', JSON.stringify({ project_id: id, mode: 'ok' })])));
    const status = async (id: string) =>
      (
        await h.query<{ status: string }>('SELECT w.status FROM llm_work_items w JOIN llm_threads t ON t.id = w.thread_id WHERE t.target_ref LIKE ?', [
          `%"${id}"%`,
        ])
      )[0]?.status;
    await waitUntil(
      async () => ((await status('r')) === 'applied' && (await status('s')) === 'applied' && h.logText().includes('charge refused by the test') ? true : null),
      'r and s applied, p refused',
      20_000,
    );
    await h.killDaemon();
    await h.startDaemon();
    await waitUntil(async () => ((await status('q')) === 'applied' ? true : null), 'q rescued and applied', 20_000);
    expect(h.logText()).toContain('recovery scan failed; rescuing its items one by one');
    expect(await status('p')).toBe('running');
    // p's call was sent once (never again: its rescue is refused); q's twice (the hung call, then its retry).
    expect(h.sim.calls.length).toBe(PROJECTS.length + 1);
  });
});
