/**
 * A full disk (issue 14, item 6), on a real small file system: COMBINE_HOME is a tmpfs mounted by the
 * test (the tests run as root, here and in CI). Under `storage.min_free_bytes` claiming pauses — no
 * paid call whose answer might not be recorded — and health says why; on a full disk the daemon keeps
 * running (failed log writes are dropped and counted), starts again after a SIGKILL, and resumes by
 * itself once space returns.
 */
import { execFileSync } from 'node:child_process';
import { appendFileSync, closeSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitForExit, waitUntil, type CommandJson } from '../helpers/harness.js';

const MiB = 2 ** 20;
let h: Harness;
let mounted = false;

afterEach(async () => {
  if (!h) return;
  const status = await h.cli(['daemon', 'status', '--json']);
  if (status.code === 0) {
    const pid = (JSON.parse(status.stdout) as { pid: number }).pid;
    process.kill(pid, 'SIGKILL');
    await waitForExit(pid);
  }
  if (mounted) execFileSync('umount', ['-l', h.home]);
  mounted = false;
  await h.cleanup();
});

const freeBytes = () => {
  const s = statfsSync(h.home);
  return s.bavail * s.bsize;
};

/** Writes a file of zeros until only `leave` bytes are free (0: until the disk is full). */
function fill(name: string, leave: number): void {
  const fd = openSync(join(h.home, name), 'a');
  const chunk = Buffer.alloc(64 * 1024);
  try {
    for (let left = freeBytes() - leave; left > 0; left -= chunk.length) writeSync(fd, chunk, 0, Math.min(chunk.length, left));
    if (leave === 0) for (;;) writeSync(fd, chunk); // the last partial blocks
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
}

/** The log's last block has room for a few lines even on a full disk: use it up, so the next line fails. */
function fillLogTail(): void {
  try {
    for (;;) appendFileSync(join(h.home, 'daemon.log'), `${' '.repeat(255)}\n`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  }
}

async function health(): Promise<{ code: number; json: any }> {
  const r = await h.cli(['health', '--json', '--no-autostart']);
  return { code: r.code, json: r.code <= 1 ? JSON.parse(r.stdout) : null };
}

describe('a full disk', () => {
  it('pauses claiming under the threshold, keeps running when full, restarts, and resumes by itself', async () => {
    h = await Harness.start();
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=32m,mode=0700', 'tmpfs', h.home]);
    mounted = true;
    h.writeConfig({ ...FAST_RETRY, storage: { min_free_bytes: 8 * MiB, probe_interval: '100ms' } });
    await h.importProject(project('p', 3));
    const e1 = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect((await h.waitForEnd(e1.thread_id)).status).toBe('complete');
    expect(h.sim.calls).toHaveLength(1);

    // Under the threshold: commands are taken, but no call starts.
    fill('filler-1', 4 * MiB);
    const low = await waitUntil(async () => {
      const r = await health();
      return r.json?.storage.state === 'low_space' ? r : null;
    }, 'health to see low space');
    expect(low.code).toBe(1);
    expect(low.json.checks.storage).toBe(false);
    expect(low.json.storage.status).toMatch(/low on space: .* under storage\.min_free_bytes \(8 MiB\); claiming is paused/);
    const e2 = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E2']);
    expect(e2.status).toBe('open');
    await new Promise((r) => setTimeout(r, 800));
    expect(h.sim.calls).toHaveLength(1);

    // Full: the daemon stays up, refuses what it cannot store, and drops the log lines it cannot write.
    fill('filler-2', 0);
    fillLogTail();
    const refused = await h.cli(['generate-epic', '--project', 'p', '--epic', 'E3']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('storage failure');
    const full = await waitUntil(async () => {
      const r = await health();
      return r.json?.storage.state === 'disk_full' && r.json.storage.log_lines_dropped > 0 ? r : null;
    }, 'health to say the disk is full');
    expect(full.code).toBe(1);
    expect(full.json.storage.status).toBe('disk full');
    expect(h.sim.calls).toHaveLength(1);

    // A crash on a full disk: it starts again (unready, saying why).
    const pid = (await h.json<{ pid: number }>(['daemon', 'status'])).pid;
    process.kill(pid, 'SIGKILL');
    await waitForExit(pid);
    const restarted = await h.cli(['daemon', 'start', '--json']);
    expect(restarted.code, restarted.stderr).toBe(0);
    const after = await health();
    expect(after.code).toBe(1);
    expect(after.json.storage.status).toBe('disk full');

    // Space returns: it resumes by itself, and the queued request is answered.
    rmSync(join(h.home, 'filler-1'));
    rmSync(join(h.home, 'filler-2'));
    await waitUntil(async () => (await health()).code === 0, 'health to be ready again');
    expect((await h.waitForEnd(e2.thread_id)).status).toBe('complete');
    expect(h.sim.calls.map((c) => c.epic_id)).toEqual(['E1', 'E2']);
    const e3 = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E3']);
    expect((await h.waitForEnd(e3.thread_id)).status).toBe('complete');
    expect((await h.json<{ ok: boolean }>(['ledger', 'verify'])).ok).toBe(true);
  });
});
