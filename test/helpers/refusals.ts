/**
 * The daemon, runs and checks of the refused-value tests (integration/refused-values.test.ts on both
 * backends, pg-refused-values.test.ts for the refusals only Postgres makes): four projects whose outline
 * runs answer together, project p's with what the case puts in front of storage.
 */
import { expect } from 'vitest';
import { type AnswerProxy, startAnswerProxy } from './answer-proxy.js';
import { installOutlineOperation } from './operations.js';
import { FAST_RETRY, Harness, project, waitUntil, type CommandJson } from './harness.js';

export const PROJECTS = ['p', 'q', 'r', 's'];

export interface Ended {
  threads: Map<string, { status: string; usage: { calls: number } }>;
  items: Map<string, { status: string; error_code: string | null; error_message: string | null }>;
}

export class RefusalRuns {
  h!: Harness;
  private proxy: AnswerProxy | undefined;

  async cleanup(): Promise<void> {
    await Promise.all([this.h?.cleanup(), this.proxy?.close()]);
    this.proxy = undefined;
  }

  /** A daemon with the outline operation (its apply's `mode`: helpers/operations.ts) and four projects; `edit` rewrites each 200 body of a prompt (through a proxy). */
  async setup(edit?: (body: any, request: string) => void, sim: Parameters<typeof Harness.start>[0] = {}): Promise<void> {
    this.h = await Harness.start(sim);
    installOutlineOperation(this.h.home);
    this.h.writeConfig(FAST_RETRY);
    await this.h.stopDaemon();
    if (edit) {
      this.proxy = await startAnswerProxy(this.h.sim.url, edit);
      this.h.env.OPENAI_BASE_URL = this.proxy.url;
    }
    await this.h.startDaemon();
    for (const id of PROJECTS) await this.h.importProject(project(id, 1));
  }

  /**
   * One outline run per project at once (their answers come back together and share a write), `mode` for
   * project p and `ok` for the others; their threads once all ended, by project. Times out with what stayed
   * open: on main, the refused item stays `running` (its write retried as storage trouble, or every round).
   */
  async runAll(mode: string): Promise<Ended> {
    return await this.ends(await this.submitAll(mode));
  }

  /** `runAll`'s runs, submitted: one outline run per project, `mode` for project p and `ok` for the others. */
  submitAll(mode: string): Promise<CommandJson[]> {
    return Promise.all(
      PROJECTS.map((id) => this.h.json<CommandJson>(['run', 'outline', '--input', JSON.stringify({ project_id: id, mode: id === 'p' ? mode : 'ok' })])),
    );
  }

  /** `runs` (of `submitAll`), once every thread of the daemon ended: their threads and items, by project. */
  async ends(runs: readonly CommandJson[]): Promise<Ended> {
    await waitUntil(
      async () => {
        const open = await this.h.query("SELECT id FROM llm_threads WHERE status IN ('open', 'running')");
        return open.length === 0 ? true : null;
      },
      'every thread to end',
      20_000,
    ).catch(async (e) => {
      const items = await this.h.query('SELECT thread_id, status, attempt, error_code FROM llm_work_items');
      throw new Error(`${(e as Error).message}; items ${JSON.stringify(items)}; provider calls ${this.h.sim.calls.length}`);
    });
    const threads = new Map<string, { status: string; usage: { calls: number } }>();
    const items = new Map<string, { status: string; error_code: string | null; error_message: string | null }>();
    for (const [i, id] of PROJECTS.entries()) {
      threads.set(id, await this.h.waitForEnd(runs[i]!.thread_id));
      const [item] = await this.h.query<{ status: string; error_code: string | null; error_message: string | null }>(
        'SELECT status, error_code, error_message FROM llm_work_items WHERE thread_id = ?',
        [runs[i]!.thread_id],
      );
      items.set(id, item!);
    }
    return { threads, items };
  }

  /**
   * What holds whatever the case: the other projects' items applied, one call each, health ready, the
   * ledger verifies; `calls`, the provider calls of the whole case (one per project's run unless given).
   */
  async expectOthersAppliedAndHealthy(ended: Ended, calls = PROJECTS.length): Promise<void> {
    for (const id of PROJECTS.slice(1)) {
      expect(ended.items.get(id)).toMatchObject({ status: 'applied' });
      expect(ended.threads.get(id)).toMatchObject({ status: 'complete', usage: { calls: 1 } });
    }
    expect(this.h.sim.calls.length).toBe(calls);
    const health = JSON.parse((await this.h.cli(['health', '--json'])).stdout);
    expect(health).toMatchObject({ ready: true, status: 'ready' });
    expect(this.h.logText()).not.toContain('storage failure');
    expect(await this.h.json(['ledger', 'verify'])).toMatchObject({ ok: true, first_break: null, incomplete: [] });
  }

  async ledgerTypes(project: string): Promise<{ entry_type: string; payload: any }[]> {
    const [t] = await this.h.query<{ id: string }>("SELECT id FROM llm_threads WHERE target_ref LIKE ? AND kind = 'outline'", [`%"${project}"%`]);
    return await this.h.json<any[]>(['ledger', t!.id]);
  }

  /**
   * A refusal by a path no check knows, made real (Postgres): a trigger on `table` (BEFORE `events`) that
   * raises each refusal's SQLSTATE, the first whose condition on NEW holds, as the server does for a value it cannot take.
   */
  async refuseRows(table: string, events: string, refusals: { when: string; code: string; message: string }[]): Promise<void> {
    const checks = refusals.map((r) => `IF ${r.when} THEN RAISE EXCEPTION '${r.message}' USING ERRCODE = '${r.code}'; END IF;`).join('\n');
    await this.h.edit(async (sql) => {
      await sql.run(`CREATE FUNCTION refuse_${table}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${checks} RETURN NEW; END $$`);
      await sql.run(`CREATE TRIGGER refuse_${table} BEFORE ${events} ON ${table} FOR EACH ROW EXECUTE FUNCTION refuse_${table}()`);
    });
  }

  /** `this.runAll(mode)` on a new daemon whose database refuses what `refusal` says (`refuseRows`). */
  async runRefusing(table: string, events: string, refusal: { when: string; code: string; message: string }, mode: string): Promise<Ended> {
    await this.setup();
    await this.refuseRows(table, events, [refusal]);
    return await this.runAll(mode);
  }
}
