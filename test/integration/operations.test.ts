/**
 * Operating the daemon: logs (readable, filterable, followable, no secrets), /metrics on loopback,
 * health, idle maintenance and the systemd unit.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { capLowersHeapLimit, DAEMON_NODE_FLAGS, OLD_SPACE_CAP } from '../../src/cli/daemon-heap.js';
import { shortId } from '../../src/domain/short-id.js';
import { CLI, FAST_RETRY, Harness, ROOT, project, waitUntil, type CommandJson } from '../helpers/harness.js';
import { parseExposition } from '../helpers/prometheus.js';
import { unusedPort } from '../helpers/ports.js';

let h: Harness;
afterEach(() => h?.cleanup());

async function runEpic(epic = 'E1', force = false) {
  const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', epic, ...(force ? ['--force'] : [])]);
  return { id: r.thread_id, end: await h.waitForEnd(r.thread_id) };
}

describe('logs', () => {
  it('never contain the API key, and every engine line names its thread and work item', async () => {
    h = await Harness.start();
    h.writeConfig(FAST_RETRY);
    const key = h.env.OPENAI_API_KEY!;
    await h.importProject(project('p', 3));
    h.setFaults([
      { kind: 'server_error', times: 1, match: 'Epic id: E1' },
      { kind: 'auth', match: 'Epic id: E2' },
    ]);
    await h.stopDaemon();
    await h.startDaemon({ COMBINE_LOG_LEVEL: 'debug' });
    expect((await runEpic('E1')).end.status).toBe('complete');
    expect((await runEpic('E2')).end.status).toBe('failed'); // 401: the provider echoes the key it got
    expect((await runEpic('E3')).end.status).toBe('complete');
    await h.stopDaemon();

    const text = h.logText();
    expect(text.length).toBeGreaterThan(0);
    expect(text).not.toContain(key);
    const lines = text
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const engine = lines.filter((l) => l.component === 'engine');
    expect(engine.length).toBeGreaterThan(20);
    for (const l of engine) {
      expect(l).toHaveProperty('thread_id');
      expect(l).toHaveProperty('work_item_id');
    }
    expect(lines.every((l) => typeof l.ts === 'string' && typeof l.level === 'string')).toBe(true);
  });

  it('`combine logs` prints them readably and filters by thread', async () => {
    h = await Harness.start();
    await h.importProject(project('p', 2));
    const first = await runEpic('E1');
    const other = await runEpic('E2');

    const human = await h.cli(['logs']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/INFO +engine +thread=[0-9a-f]{8} item=[0-9a-f]{8} +ledger response/);

    const filtered = await h.cli(['logs', '--thread', first.id, '--json']);
    const objs = filtered.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { thread_id: string; msg: string });
    expect(objs.length).toBeGreaterThan(4);
    expect(objs.every((o) => o.thread_id === first.id)).toBe(true);
    expect(objs.map((o) => o.msg)).toEqual(expect.arrayContaining(['ledger prompt', 'ledger response', 'thread complete']));
    expect(filtered.stdout).not.toContain(other.id);

    const tail = await h.cli(['logs', '-n', '2']);
    expect(tail.stdout.trim().split('\n')).toHaveLength(2);
  });

  it('`combine logs -f` prints lines as they are written', async () => {
    h = await Harness.start();
    await h.importProject(project('p', 1));
    const follower = spawn(process.execPath, [CLI, 'logs', '-f'], { env: h.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    follower.stdout.on('data', (d) => (out += d));
    try {
      const { id } = await runEpic('E1');
      await waitUntil(() => out.includes(`thread=${shortId(id)}`) && out.includes('thread complete'), 'the run to appear in the followed log');
    } finally {
      follower.kill('SIGTERM');
    }
  });
});

describe('metrics over HTTP', () => {
  it('`daemon start --metrics-port` serves /metrics on 127.0.0.1 only', async () => {
    h = await Harness.start();
    const port = await unusedPort();
    const r = await h.cli(['daemon', 'start', '--metrics-port', String(port)]);
    expect(r.code, r.stderr).toBe(0);
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const families = parseExposition(await res.text());
    expect(families.find((f) => f.name === 'combine_threads')?.type).toBe('GAUGE');
    expect((await fetch(`http://127.0.0.1:${port}/other`)).status).toBe(404);
    const external = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal);
    if (external) {
      const refused = await new Promise<boolean>((resolve) => {
        const s = net.connect(port, external.address);
        s.once('connect', () => {
          s.destroy();
          resolve(false);
        });
        s.once('error', () => resolve(true));
      });
      expect(refused).toBe(true);
    }
    expect((await h.cli(['daemon', 'start', '--metrics-port', '99999'])).code).toBe(2);
  });
});

describe('health', () => {
  it('is ready with every check passing, and exit 0', async () => {
    h = await Harness.start();
    const r = await h.cli(['health', '--json']);
    expect(r.code).toBe(0);
    const health = JSON.parse(r.stdout);
    expect(health).toMatchObject({
      live: true,
      ready: true,
      checks: { database: true, migrations_applied: true, recovery_scan_done: true, provider_breakers_closed: true },
      migrations: { pending: 0 },
    });
  });

  it('is unready (exit 1) while the provider breaker is open', async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, breaker: { failure_threshold: 2, open: '10m' } });
    await h.importProject(project('p', 1));
    expect((await h.cli(['health'])).code).toBe(0);
    h.setFaults([{ kind: 'server_error' }]);
    await h.json(['generate-epic', '--project', 'p', '--epic', 'E1']);
    // Two 500s open the breaker (for 10 minutes): the item waits, queued, and health says why.
    const r = await waitUntil(async () => {
      const res = await h.cli(['health', '--json']);
      return res.code === 1 ? res : null;
    }, 'health to turn unready');
    expect(JSON.parse(r.stdout)).toMatchObject({ ready: false, checks: { provider_breakers_closed: false, database: true } });
    expect((await h.cli(['metrics'])).stdout).toMatch(/^combine_breaker_state 2$/m);
  });
});

describe('daemon install', () => {
  it('writes a systemd user unit that runs the daemon (its own entry, as `combine daemon run`) and passes systemd-analyze verify', async () => {
    h = await Harness.start();
    const env = { XDG_CONFIG_HOME: join(h.home, 'config') };
    const r = await h.json(['daemon', 'install', '--metrics-port', '9464'], { env });
    expect(r.path).toBe(join(h.home, 'config', 'systemd', 'user', 'combine.service'));
    const unit = readFileSync(r.path, 'utf8');
    expect(unit).toContain(`ExecStart=${process.execPath} ${DAEMON_NODE_FLAGS.join(' ')} ${join(ROOT, 'dist', 'daemon-run.js')} --metrics-port 9464`);
    expect(unit).toContain(`Environment=COMBINE_HOME=${h.home}`);
    expect(unit).toContain('Environment=MALLOC_ARENA_MAX=1');
    // The heap cap in the environment, where daemon.env (read after it) can replace it; only where it lowers V8's limit.
    expect(unit.includes(`Environment=NODE_OPTIONS=${OLD_SPACE_CAP}\n`)).toBe(await capLowersHeapLimit());
    expect(unit.indexOf('Environment=NODE_OPTIONS')).toBeLessThan(unit.indexOf('EnvironmentFile='));
    expect(unit).toContain('WantedBy=default.target');
    expect(r.next).toContain('systemctl --user enable --now combine.service');
    expect((await h.cli(['daemon', 'install'], { env })).code).toBe(1); // exists: needs --force
    expect((await h.cli(['daemon', 'install', '--force'], { env })).code).toBe(0);

    const analyze = spawnSync('systemd-analyze', ['verify', r.path], { encoding: 'utf8' });
    if (analyze.error) {
      console.warn('systemd-analyze not found: skipping the unit verification');
      return;
    }
    expect(analyze.status, analyze.stderr).toBe(0);
  });
});
