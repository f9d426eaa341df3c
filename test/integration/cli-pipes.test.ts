/**
 * The CLI through broken pipes (issues 17 and 18): a reader that leaves early (`| head -1`) ends the
 * command quietly with exit 0; any other EPIPE — not stdout's own — is a failure, exit 1 with the error
 * (src/cli/main.ts).
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, Harness, project, type CommandJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

/** `sh -c '<combine …> | head -1'`: the combine process's own exit code and stderr. */
function intoHead(h: Harness, args: string[]): Promise<{ code: number; stderr: string; firstLine: string }> {
  const cmd = `"${process.execPath}" "${CLI}" ${args.map((a) => `'${a}'`).join(' ')} 2>"$ERR" | head -1; echo "rc=\${PIPESTATUS[0]}"`;
  const errFile = join(h.home, `stderr-${Math.random().toString(36).slice(2)}`);
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', cmd], { env: { ...h.env, ERR: errFile }, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', () => {
      const lines = out.trim().split('\n');
      resolve({ code: Number(/rc=(\d+)/.exec(lines[lines.length - 1]!)![1]), stderr: readFileSync(errFile, 'utf8'), firstLine: lines[0]! });
    });
  });
}

describe('broken pipes', () => {
  it('a reader that leaves early (`| head -1`) ends the command quietly with exit 0', async () => {
    h = await Harness.start();
    await h.importProject(project('big', 30));
    const r = await h.json<CommandJson>(['generate-all', '--project', 'big']);
    await h.waitForEnd(r.thread_id);
    // Each output is larger than a pipe's buffer (64 KiB), so the write really meets a closed pipe.
    const exportAll = await h.cli(['ledger', 'export', '--project', 'big']);
    expect(exportAll.stdout.length).toBeGreaterThan(65_536);
    expect((await h.cli(['logs', '--json'])).stdout.length).toBeGreaterThan(65_536);
    for (const args of [['ledger', 'export', '--project', 'big'], ['logs', '--json'], ['logs'], ['metrics', '--json'], ['ledger', r.thread_id, '--json']]) {
      const piped = await intoHead(h, args);
      expect(piped.code, args.join(' ')).toBe(0);
      expect(piped.stderr, args.join(' ')).toBe('');
      expect(piped.firstLine.length).toBeGreaterThan(0);
    }
  });

  it("an EPIPE that is not stdout's is a failure (exit 1, with the error), not a reader that left", async () => {
    h = await Harness.start();
    // Loaded before the CLI: once the CLI listens for uncaught errors, a write to a pipe whose reader has
    // closed it, with no 'error' listener — as a socket the command writes to, closed at the other end.
    const preload = join(h.home, 'foreign-epipe.cjs');
    writeFileSync(
      preload,
      `const child = require('node:child_process').spawn('sh', ['-c', 'exec 0<&-; echo closed; sleep 2'], { stdio: ['pipe', 'pipe', 'ignore'] });
      child.stdout.once('data', function write() {
        if (process.listenerCount('uncaughtException') === 0) return void setTimeout(write, 5);
        child.stdin.write('x');
      });`,
    );
    const r = await h.cli(['completion', 'bash'], { env: { NODE_OPTIONS: `--require "${preload}"` } });
    expect(r.stdout).toContain('complete');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/combine: unexpected error: Error: write EPIPE/);
  });
});
