/**
 * Short ids and prefixes (issue 17): threads made together get distinct short ids, and every command
 * that takes an id accepts the short id or any unique prefix; an ambiguous one is exit 2 listing the
 * candidates.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shortId } from '../../src/domain/short-id.js';
import { FAST_RETRY, Harness, project, type ThreadJson } from '../helpers/harness.js';

/** Runs `fn` over `items`, `n` at a time (each is a CLI process; the machine has 2 cores). */
async function eachLimited<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: n }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
    }),
  );
}

describe('50 threads created in one second', () => {
  let h: Harness;
  let children: ThreadJson[];
  let parent: ThreadJson;
  beforeAll(async () => {
    // Every call is refused at once (HTTP 400, permanent): each child ends failed, ready for retry.
    h = await Harness.start({ faults: [{ kind: 'bad_request' }] });
    h.writeConfig(FAST_RETRY);
    await h.importProject(project('many', 50));
    const r = await h.json(['generate-all', '--project', 'many']);
    parent = await h.waitForEnd(r.thread_id);
    const all = await h.json<ThreadJson[]>(['threads', '--project', 'many']);
    children = all.filter((t) => t.parent_thread_id === parent.thread_id);
  });
  afterAll(() => h.cleanup());

  it('were made within one second, and share the first 8 characters the old short id showed', () => {
    expect(children).toHaveLength(50);
    const times = children.map((c) => Date.parse(c.created_at));
    expect(Math.max(...times) - Math.min(...times)).toBeLessThan(1000);
    expect(new Set(children.map((c) => c.thread_id.slice(0, 8))).size).toBe(1);
  });

  it('each get a distinct short id in `threads`, and that id is the one shown', async () => {
    const table = await h.cli(['threads', '--project', 'many']);
    expect(table.code).toBe(0);
    const shown = table.stdout
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => l.split(/\s+/)[0]!);
    expect(shown).toHaveLength(51);
    expect(new Set(shown).size).toBe(51);
    for (const c of children) expect(shown).toContain(shortId(c.thread_id));
  });

  it('each short id is accepted by thread, ledger, retry and cancel', async () => {
    h.setFaults([{ kind: 'hang' }]); // retried children stay running, so cancel has work to end
    await eachLimited(children, 4, async (c) => {
      const id = shortId(c.thread_id);
      const detail = await h.json(['thread', id]);
      expect(detail.thread_id).toBe(c.thread_id);
      const ledger = await h.json<{ thread_id: string; entry_type: string }[]>(['ledger', id]);
      expect(ledger.length).toBeGreaterThan(0);
      expect(ledger.every((e) => e.thread_id === c.thread_id)).toBe(true);
      const retried = await h.json(['retry', id]);
      expect(retried).toMatchObject({ thread_id: c.thread_id, status: 'open' });
      const canceled = await h.json(['cancel', id]);
      expect(canceled).toMatchObject({ thread_id: c.thread_id, status: 'canceled' });
    });
  }, 180_000);

  it('a prefix of the whole id or of the short id works when it is unique', async () => {
    const c = children[7]!;
    expect((await h.json(['thread', shortId(c.thread_id).slice(0, 6)])).thread_id).toBe(c.thread_id);
    expect((await h.json(['thread', c.thread_id.slice(0, 30)])).thread_id).toBe(c.thread_id);
    expect((await h.json(['thread', shortId(c.thread_id).toUpperCase()])).thread_id).toBe(c.thread_id);
    const exported = await h.cli(['ledger', 'export', shortId(c.thread_id)]);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout).toContain(c.thread_id);
    // A work item's id names its thread.
    const item = (await h.queryOne<{ id: string }>('SELECT id FROM llm_work_items WHERE thread_id = ? ORDER BY sequence LIMIT 1', [c.thread_id]))!;
    expect((await h.json(['thread', shortId(item.id)])).thread_id).toBe(c.thread_id);
  });

  it('an ambiguous prefix is exit 2 listing the candidates; an unknown one is exit 2 too', async () => {
    const prefix = children[0]!.thread_id.slice(0, 8);
    for (const args of [
      ['thread', prefix],
      ['ledger', prefix],
      ['retry', prefix],
      ['cancel', prefix],
      ['threads', '--parent', prefix],
    ]) {
      const r = await h.cli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain('matches several threads');
      expect(r.stderr.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g)!.length).toBeGreaterThanOrEqual(10);
    }
    const unknown = await h.cli(['thread', 'ffffffff']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no thread "ffffffff"');
    const short = await h.cli(['thread', 'ab']);
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('at least 4 characters');
  });

  it('`threads --parent <short id>` lists the children; `logs --thread` refuses an ambiguous prefix', async () => {
    const list = await h.json<ThreadJson[]>(['threads', '--parent', shortId(parent.thread_id), '--limit', '100']);
    expect(list.map((t) => t.thread_id).sort()).toEqual(children.map((c) => c.thread_id).sort());
    const logs = await h.cli(['logs', '--thread', children[0]!.thread_id.slice(0, 8)]);
    expect(logs.code).toBe(2);
    expect(logs.stderr).toContain('matches');
    const one = await h.cli(['logs', '--thread', shortId(children[3]!.thread_id), '--json']);
    expect(one.code).toBe(0);
    const lines = one.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { thread_id: string });
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.every((l) => l.thread_id === children[3]!.thread_id)).toBe(true);
  });

  it('schedule commands take a schedule short id', async () => {
    const s = await h.json(['schedule', 'add', '--project', 'many', '--operation', 'briefing', '--cron', '0 8 * * *']);
    const paused = await h.json(['schedule', 'pause', shortId(s.schedule_id)]);
    expect(paused).toMatchObject({ schedule_id: s.schedule_id, status: 'paused' });
    expect(await h.json(['schedule', 'runs', shortId(s.schedule_id).slice(0, 5)])).toEqual([]);
    const missing = await h.cli(['schedule', 'resume', 'eeeeeeee']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no schedule "eeeeeeee"');
  });
});
