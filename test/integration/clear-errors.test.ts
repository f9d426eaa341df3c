/**
 * Clear errors (issue 14, items 12 and 13): `ledger export --out` never follows a symlink or overwrites
 * a file by accident; a bad log level is a usage error naming the variable; `prune --dry-run` counts
 * what the prune removes; the socket API never sends a stack trace; following an unknown thread is a 404.
 */
import { lstatSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { TRPCClientError } from '@trpc/client';
import { connectWithSubscriptions } from '../../src/cli/subscriptions.js';
import type { AppRouter } from '../../src/daemon/router.js';
import { FAST_RETRY, Harness, project, type CommandJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

const mode = (p: string) => statSync(p).mode & 0o777;

describe('ledger export --out', () => {
  it('creates a new 0600 file, refuses an existing path or a symlink, and with --force replaces the link, not its target', async () => {
    h = await Harness.start();
    h.writeConfig(FAST_RETRY);
    await h.importProject(project('p', 1));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    await h.waitForEnd(r.thread_id);
    const exportTo = (out: string, ...more: string[]) => h.cli(['ledger', 'export', r.thread_id, '--out', out, ...more]);

    const fresh = join(h.home, 'fresh.jsonl');
    expect((await exportTo(fresh)).code).toBe(0);
    expect(mode(fresh)).toBe(0o600);
    expect(readFileSync(fresh, 'utf8')).toContain(r.thread_id);

    const existing = join(h.home, 'existing.jsonl');
    writeFileSync(existing, 'keep me\n', { mode: 0o644 });
    const refused = await exportTo(existing);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/already exists.*--force/);
    expect(readFileSync(existing, 'utf8')).toBe('keep me\n');

    const target = join(h.home, 'precious.txt');
    writeFileSync(target, 'precious\n', { mode: 0o644 });
    const link = join(h.home, 'link.jsonl');
    symlinkSync(target, link);
    expect((await exportTo(link)).code).toBe(2);
    expect(readFileSync(target, 'utf8')).toBe('precious\n');
    expect(readlinkSync(link)).toBe(target);

    expect((await exportTo(link, '--force')).code).toBe(0);
    expect(readFileSync(target, 'utf8')).toBe('precious\n'); // the link's target is untouched
    expect(lstatSync(link).isSymbolicLink()).toBe(false);
    expect(mode(link)).toBe(0o600);
    expect(readFileSync(link, 'utf8')).toContain(r.thread_id);

    expect((await exportTo(existing, '--force')).code).toBe(0);
    expect(mode(existing)).toBe(0o600);
    expect(readFileSync(existing, 'utf8')).toContain(r.thread_id);
  });
});

describe('bad input and unknown ids', () => {
  it('COMBINE_LOG_LEVEL=verbose: exit 2 naming the variable and the allowed levels, no stack trace', async () => {
    h = await Harness.start();
    const r = await h.cli(['daemon', 'start'], { env: { COMBINE_LOG_LEVEL: 'verbose' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('COMBINE_LOG_LEVEL: "verbose" is not a log level');
    expect(r.stderr).toMatch(/debug, info, warn, error/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('prune --dry-run counts the work items the prune removes', async () => {
    h = await Harness.start();
    h.writeConfig(FAST_RETRY);
    await h.importProject(project('p', 1));
    h.setFaults([{ kind: 'bad_request' }]);
    const failed: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
      await h.waitForEnd(r.thread_id);
      failed.push(r.thread_id);
    }
    await h.json(['retry', failed[0]!]);
    await h.waitForEnd(failed[0]!);
    await new Promise((r) => setTimeout(r, 20));
    const dry = await h.json<any>(['prune', '--older-than', '1ms', '--dry-run']);
    const real = await h.json<any>(['prune', '--older-than', '1ms']);
    expect(dry).toMatchObject({ dry_run: true, threads: 3, work_items: 4 });
    expect(real).toMatchObject({ dry_run: false, threads: dry.threads, work_items: dry.work_items, ledger_entries: dry.ledger_entries });
  });

  it('the socket API answers errors without server stack traces', async () => {
    h = await Harness.start();
    await h.json(['project', 'list']);
    const get = (path: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request({ socketPath: join(h.home, 'combine.sock'), path }, (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on('error', reject);
        req.end();
      });
    const notFound = await get(`/thread?input=${encodeURIComponent(JSON.stringify({ thread_id: 'nope' }))}`);
    const badInput = await get(`/thread?input=${encodeURIComponent(JSON.stringify({ thread_id: 42 }))}`);
    const noRoute = await get('/no.such.procedure');
    expect([notFound.status, badInput.status, noRoute.status]).toEqual([404, 400, 404]);
    for (const r of [notFound, badInput, noRoute]) {
      expect(r.body).not.toContain('"stack"');
      expect(r.body).not.toMatch(/at .*\.(js|ts):\d+/);
    }
  });

  it('following an unknown thread is NOT_FOUND over the subscription itself, not an internal error', async () => {
    h = await Harness.start();
    const r = await h.cli(['thread', 'no-such-thread', '--follow', '--json']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('no thread "no-such-thread"');
    // The subscription, as any client of the socket API sees it (the CLI looks the thread up first).
    const conn = connectWithSubscriptions(join(h.home, 'combine.sock'));
    try {
      const err = await new Promise<TRPCClientError<AppRouter>>((resolve) => {
        conn.client.follow.subscribe({ thread_id: 'no-such-thread' }, { onError: (e) => resolve(e as TRPCClientError<AppRouter>), onData: () => {} });
      });
      expect(err.data?.code).toBe('NOT_FOUND');
      expect(err.message).toBe('no thread "no-such-thread"');
      expect(err.data).not.toHaveProperty('stack');
    } finally {
      conn.close();
    }
  });
});
