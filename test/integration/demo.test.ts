/** `combine demo`: the whole flow offline, for a user on a fresh machine with no API key. */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, ROOT } from '../helpers/harness.js';

const acme = JSON.parse(readFileSync(join(ROOT, 'examples', 'acme.json'), 'utf8')) as { epics: { id: string; title: string }[] };
const scratch = mkdtempSync(join(tmpdir(), 'cmb-demo-'));

/** Runs `combine demo` with no OPENAI_* variables at all, as on a fresh machine. */
function demo(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH, HOME: scratch, TMPDIR: scratch };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'demo', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('combine demo', () => {
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('prints stories for every epic of the example, says the model was simulated, and cleans up', async () => {
    const r = await demo([]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('SIMULATED');
    expect(r.stdout).toContain('ledger ok');
    for (const epic of acme.epics) {
      // Each epic heading is followed by numbered stories, not "(no stories yet)".
      expect(r.stdout).toMatch(new RegExp(`${epic.id}  ${epic.title}\\n  1\\. `));
    }
    // The temporary home (with its daemon) is gone: nothing is left running or on disk.
    const home = /state: (\S+)/.exec(r.stdout)?.[1];
    expect(home).toBeDefined();
    expect(() => readFileSync(join(home!, 'daemon.pid'))).toThrow();
  }, 30_000);

  it('prints one JSON summary with --json', async () => {
    const r = await demo(['--json', '--latency', '0']);
    expect(r.code).toBe(0);
    const summary = JSON.parse(r.stdout);
    expect(summary).toMatchObject({ simulated: true, project_id: 'acme', status: 'complete', ledger_ok: true });
    expect(summary.epics.map((e: { epic_id: string }) => e.epic_id)).toEqual(acme.epics.map((e) => e.id));
    for (const e of summary.epics) expect(e.stories).toBeGreaterThan(0);
    expect(summary.provider_calls).toBe(acme.epics.length);
  }, 30_000);
});
