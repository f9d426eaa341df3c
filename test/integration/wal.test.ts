/**
 * SQLite's write-ahead log, which only the SQLite backend has (not in the postgres project: Postgres's
 * WAL is its server's to manage): idle maintenance truncates it, and a WAL over pressure.wal.max_bytes
 * refuses new commands (issue 16, item 3). The WAL signal is real: a reader holding an old snapshot
 * keeps the checkpoint from shrinking it.
 */
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitUntil, type CommandJson } from '../helpers/harness.js';
import { parseExposition } from '../helpers/prometheus.js';

let h: Harness;
afterEach(() => h?.cleanup());

async function health(): Promise<any> {
  return JSON.parse((await h.cli(['health', '--json'])).stdout);
}

async function pressureGauge(signal: string): Promise<number> {
  const family = parseExposition((await h.cli(['metrics'])).stdout).find((f) => f.name === 'combine_pressure');
  return Number(family?.metrics.find((m) => m.labels?.signal === signal)?.value);
}

describe('idle maintenance', () => {
  it('truncates the WAL once the daemon has been idle', async () => {
    h = await Harness.start();
    h.writeConfig({ maintenance: { idle_after: '300ms' } });
    await h.importProject(project('p', 2));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    await h.waitForEnd(r.thread_id);
    const wal = join(h.home, 'combine.db-wal');
    await waitUntil(() => statSync(wal).size === 0, 'the WAL to be truncated');
    const metrics = (await h.cli(['metrics'])).stdout;
    expect(metrics).toMatch(/^combine_maintenance_runs_total [1-9]/m);
    expect(metrics).toMatch(/^combine_wal_bytes 0$/m);
  });
});

describe('WAL pressure', () => {
  it('a WAL over pressure.wal.max_bytes refuses new commands with BACKPRESSURE (exit 1, nothing stored) until a checkpoint shrinks it', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, pressure: { probe_interval: '50ms', wal: { max_bytes: 256 * 1024 } } });
    await h.startDaemon();
    // A reader on an old snapshot: checkpoints cannot truncate the WAL while it lives.
    const reader = h.openDb();
    reader.prepare('BEGIN').run();
    reader.prepare('SELECT count(*) FROM projects').get();

    const big = (id: string) => ({ ...project(id, 40), epics: project(id, 40).epics.map((e) => ({ ...e, description: 'x'.repeat(4000) })) });
    let refused: { code: number; stderr: string } | null = null;
    let n = 0;
    for (; n < 30 && !refused; n++) {
      const file = join(h.home, `big-${n}.json`);
      writeFileSync(file, JSON.stringify(big(`big${n}`)));
      const r = await h.cli(['project', 'import', file]);
      if (r.code !== 0) refused = r;
      else await new Promise((res) => setTimeout(res, 100)); // a probe sees the WAL grow
    }
    expect(refused, 'a command is refused once the WAL is over its limit').not.toBeNull();
    expect(refused!.code).toBe(1);
    expect(refused!.stderr).toContain('BACKPRESSURE');
    expect(refused!.stderr).toContain('pressure.wal.max_bytes');
    const hj = await health();
    expect(hj.pressure.wal.over).toBe(true);
    expect(hj.pressure.accepting_commands).toBe(false);
    expect(hj.checks.accepting_commands).toBe(false);
    expect(hj.ready).toBe(false);
    const gen = await h.cli(['generate-epic', '--project', 'big0', '--epic', 'E1']);
    expect(gen.code).toBe(1);
    expect(gen.stderr).toContain('BACKPRESSURE');
    expect(await pressureGauge('wal')).toBe(1);

    reader.prepare('COMMIT').run();
    reader.close();
    const check = h.openDb();
    const refusedId = `big${n - 1}`;
    expect(check.prepare('SELECT count(*) AS c FROM projects WHERE id = ?').get(refusedId)).toEqual({ c: 0 });
    expect(check.prepare('SELECT count(*) AS c FROM llm_threads').get()).toEqual({ c: 0 });
    check.close();

    // The reader is gone: the next checkpoint truncates the WAL and commands are accepted again.
    await waitUntil(async () => (await health()).pressure.accepting_commands, 'the WAL to be checkpointed');
    const again = await h.cli(['project', 'import', join(h.home, `big-${n - 1}.json`)]);
    expect(again.code, again.stderr).toBe(0);
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'big0', '--epic', 'E1']);
    expect((await h.waitForEnd(r.thread_id)).status).toBe('complete');
  });
});
