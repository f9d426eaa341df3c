/**
 * The CLI's habits (issue 17): bare `combine`, suggestions, `daemon start` errors, `config show` in the
 * file's own keys, money shown honestly, one count of calls, `doctor`, `health` and an open breaker, and
 * shell completion that a real bash runs. Broken pipes: cli-pipes.test.ts.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { configFileSchema } from '../../src/daemon/config/config-file.js';
import { FAST_RETRY, Harness, project, ROOT, type CommandJson, type ThreadJson } from '../helpers/harness.js';
import { unusedPort } from '../helpers/ports.js';

let h: Harness;
afterEach(() => h?.cleanup());

describe('habits', () => {
  it('bare `combine` prints the help on stdout (exit 0); unknown commands are answered by meaning', async () => {
    h = await Harness.start();
    const bare = await h.cli([]);
    expect(bare.code).toBe(0);
    expect(bare.stdout).toContain('Usage: combine');
    expect(bare.stdout).toContain('doctor');
    expect(bare.stderr).toBe('');
    const status = await h.cli(['status']);
    expect(status.code).toBe(2);
    expect(status.stderr).toContain('Did you mean: combine daemon status, combine health');
    const kill = await h.cli(['kill']);
    expect(kill.stderr).toContain('combine cancel');
  });

  it('`daemon start` shows only the log lines of this attempt', async () => {
    h = await Harness.start();
    h.writeConfig({ engine: { max_in_flight: 'many' } });
    const first = await h.cli(['daemon', 'start']);
    expect(first.code).toBe(2);
    expect(first.stderr).toContain('engine.max_in_flight');
    h.writeConfig({ retry: { jitter: 7 } });
    const second = await h.cli(['daemon', 'start']);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain('retry.jitter');
    expect(second.stderr).not.toContain('engine.max_in_flight'); // the earlier failure is not repeated
    expect(h.logText()).toContain('engine.max_in_flight'); // though the log keeps it
  });
});

describe('threads: filters and paging', () => {
  it('filters by status, kind, parent and age, and pages with --limit/--cursor without gaps or repeats', async () => {
    h = await Harness.start({ faults: [{ kind: 'bad_request', match: 'Epic id: E2' }] });
    await h.importProject(project('q', 4));
    const all = await h.json<CommandJson>(['generate-all', '--project', 'q']);
    await h.waitForEnd(all.thread_id);
    const single = await h.json<CommandJson>(['generate-epic', '--project', 'q', '--epic', 'E1', '--force']);
    await h.waitForEnd(single.thread_id);
    const everything = await h.json<ThreadJson[]>(['threads']);
    expect(everything).toHaveLength(6);

    const failed = await h.json<ThreadJson[]>(['threads', '--status', 'failed']);
    expect(failed.map((t) => t.target_ref.epic_id ?? 'all').sort()).toEqual(['E2', 'all']);
    expect(await h.json<ThreadJson[]>(['threads', '--status', 'failed', 'complete', '--kind', 'story_generate_all'])).toHaveLength(1);
    expect(await h.json<ThreadJson[]>(['threads', '--kind', 'story_generate_epic'])).toHaveLength(5);
    const children = await h.json<ThreadJson[]>(['threads', '--parent', all.thread_id]);
    expect(children).toHaveLength(4);
    expect(children.every((c) => c.parent_thread_id === all.thread_id)).toBe(true);
    expect(await h.json<ThreadJson[]>(['threads', '--since', '1h'])).toHaveLength(6);
    await new Promise((r) => setTimeout(r, 50));
    expect(await h.json<ThreadJson[]>(['threads', '--since', '20ms'])).toEqual([]);

    const seen: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const list: ThreadJson[] = await h.json<ThreadJson[]>(['threads', '--limit', '4', ...(cursor ? ['--cursor', cursor] : [])]);
      seen.push(...list.map((t) => t.thread_id));
      if (list.length < 4) break;
      cursor = list[list.length - 1]!.thread_id;
    }
    expect(seen).toEqual(everything.map((t) => t.thread_id)); // same order, nothing twice, nothing missed
    const human = await h.cli(['threads', '--limit', '4']);
    expect(human.stderr).toMatch(/more: add --cursor [0-9a-f]{8} for the next page/);

    for (const bad of [
      ['--status', 'done'],
      ['--since', 'yesterday'],
      ['--limit', '0'],
      ['--active', '--status', 'open'],
    ]) {
      const r = await h.cli(['threads', ...bad]);
      expect(r.code, bad.join(' ')).toBe(2);
    }
  });
});

describe('config show', () => {
  it('prints config.json keys and shape: pasted back into config.json it gives the same configuration', async () => {
    h = await Harness.start();
    const full = {
      provider: { temperature: 0, max_tokens: 1000, timeout: '45s', response_format: 'json_object', max_answer_bytes: 2000000 },
      interrupted: 'hold',
      storage: { min_free_bytes: 1000, probe_interval: '2s' },
      api: { max_connections: 100, header_timeout: '20s', request_timeout: '2m', idle_timeout: '10s', max_body_bytes: 2000000, max_import_bytes: 9000000 },
      redact: { env: ['MY_SECRET'] },
      engine: { max_in_flight: 3, max_queued: 500, recovery_interval: '20s', drain_timeout: '5s' },
      maintenance: { idle_after: '2m' },
      http: { port: 0 },
      retry: { base: '200ms', cap: '10s', jitter: 0.2, max_attempts: 4, repair_attempts: 2, max_provider_wait: '5m' },
      breaker: { failure_threshold: 7, open: '20s', max_open: '10m' },
      operations: {
        story_generate_epic: {
          retry: { max_attempts: 5 },
          interrupted: 'retry',
          validation: { min_stories: 2, max_stories: 9, required_story_fields: ['estimate_points'] },
        },
      },
      cache: true,
      models: { fast: 'test-model' },
      rate_limits: { 'test-model': { requests_per_minute: 100, tokens_per_minute: 50000 } },
      scheduling: { project_weights: { acme: 3 }, default_weight: 2, aging_step: '30s' },
      prices: { 'test-model': { input_per_million_usd: 1, output_per_million_usd: 2 } },
      budgets: { default: { daily_cost_usd: 5 }, projects: { acme: { total_tokens: 100000 } } },
      scheduler: { stale_after: '3m', misfire_grace: '30s' },
    };
    h.writeConfig(full);
    const shown = await h.cli(['config', 'show']);
    expect(shown.code, shown.stderr).toBe(0);
    const file = JSON.parse(shown.stdout) as Record<string, any>;
    expect(configFileSchema.safeParse(file).success).toBe(true); // the daemon would accept it
    expect(file.engine).toEqual({ max_in_flight: 3, max_queued: 500, recovery_interval: '20s', drain_timeout: '5s' });
    expect(file.breaker).toEqual({ failure_threshold: 7, open: '20s', max_open: '10m' });
    expect(file.redact).toEqual({ env: ['MY_SECRET'] });
    expect(file.operations.story_generate_epic.interrupted).toBe('retry');
    expect(file.interrupted).toBe('hold');
    expect(file.provider).toMatchObject({ base_url: h.sim.url, model: 'test-model', timeout: '45s' });
    expect(shown.stdout).not.toContain('maxInFlight');
    expect(shown.stdout).not.toContain(h.env.OPENAI_API_KEY!);
    expect(shown.stderr).toContain('set (redacted)');

    // Pasted back: the daemon starts with it and shows the same.
    await h.stopDaemon();
    writeFileSync(join(h.home, 'config.json'), shown.stdout);
    expect(JSON.parse((await h.cli(['config', 'show'])).stdout)).toEqual(file);
    // --json keeps the resolved settings and adds the file form.
    const json = await h.json(['config', 'show']);
    expect(json.maxInFlight).toBe(3);
    expect(json.file).toEqual(file);

    // Every key config.json accepts is documented in the README.
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const placeholders: Record<string, string> = { 'test-model': '<model>', story_generate_epic: '<name>', acme: '<id>', fast: '<logical>' };
    const paths = (o: Record<string, unknown>, prefix: string): string[] =>
      Object.entries(o).flatMap(([k, v]) => {
        const key = placeholders[k] ?? k;
        const path = prefix ? `${prefix}.${key}` : key;
        if (path === 'scheduling.project_weights') return [path];
        return v && typeof v === 'object' && !Array.isArray(v) ? paths(v as Record<string, unknown>, path) : [path];
      });
    const has = (s: string) => readme.includes(`\`${s}\``);
    for (const p of paths(file, '')) {
      const leaf = p.split('.').pop()!;
      const parent = p.split('.').slice(0, -1).join('.');
      // The table names a key whole (`retry.base`), as a sibling (`rate_limits.<model>.requests_per_minute`,
      // `.tokens_per_minute`) or under a wildcard (`budgets.default.*` with its leaves listed).
      const documented =
        has(p) || (has(`.${leaf}`) && (readme.includes(`\`${parent}.`) || has(parent))) || (has(`${parent}.*`) && (has(leaf) || has(`retry.${leaf}`)));
      expect(documented, `README documents ${p}`).toBe(true);
    }
    expect(readme).toContain('`breaker.failure_threshold`');
  });
});

describe('money and calls', () => {
  it('shows unpriced (null in JSON) when no price is known, never $0; a price gives dollars', async () => {
    h = await Harness.start();
    await h.importProject(project('m', 2));
    const dry = await h.json(['generate-all', '--project', 'm', '--dry-run']);
    expect(dry).toMatchObject({ priced: false, estimated_max_cost: null });
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'm', '--epic', 'E1']);
    const t = await h.waitForEnd(r.thread_id);
    expect(t.usage).toMatchObject({ calls: 1, cost_usd: null, unpriced_calls: 1 });
    expect(t.usage.total_tokens).toBeGreaterThan(0);
    const table = await h.cli(['threads']);
    expect(table.stdout).toContain('unpriced');
    expect(table.stdout).not.toContain('$0.0000');
    expect((await h.cli(['thread', r.thread_id])).stdout).toMatch(/usage +1 call, \d+ tok, unpriced/);
    const usage = await h.json(['usage']);
    expect(usage.totals).toMatchObject({ calls: 1, cost_usd: null, unpriced_calls: 1 });
    expect((await h.cli(['generate-all', '--project', 'm', '--dry-run'])).stdout).toContain('unpriced: no price for test-model');

    await h.stopDaemon();
    h.writeConfig({ prices: { 'test-model': { input_per_million_usd: 1000, output_per_million_usd: 1000 } } });
    const r2 = await h.json<CommandJson>(['generate-epic', '--project', 'm', '--epic', 'E2']);
    const priced = await h.waitForEnd(r2.thread_id);
    expect(priced.usage.cost_usd).toBeCloseTo(priced.usage.total_tokens / 1000, 6);
    expect(priced.usage.unpriced_calls).toBe(0);
    const both = await h.json(['usage']);
    expect(both.totals).toMatchObject({ calls: 2, unpriced_calls: 1 });
    expect(both.totals.cost_usd).toBeCloseTo(priced.usage.cost_usd!, 6);
    expect((await h.cli(['usage'])).stdout).toMatch(/total: 2 calls, \d+ tok, \$\d+\.\d+ \+ 1 unpriced/);
  });

  it('stats, usage and thread count calls the same way, across retries of refused calls', async () => {
    // Two 500s (sent, answered with an error, not billed), then an answer; a second epic answers at once.
    h = await Harness.start({ faults: [{ kind: 'server_error', match: 'Epic id: E1', times: 2 }] });
    h.writeConfig(FAST_RETRY);
    await h.importProject(project('c', 2));
    const r = await h.json<CommandJson>(['generate-all', '--project', 'c']);
    const parent = await h.waitForEnd(r.thread_id);
    expect(h.sim.calls).toHaveLength(4);
    const stats = await h.json(['stats']);
    const usage = await h.json(['usage']);
    const threads = await h.json<ThreadJson[]>(['threads', '--parent', r.thread_id]);
    expect(stats.calls).toBe(2);
    expect(usage.totals.calls).toBe(2);
    expect(parent.usage.calls).toBe(2);
    expect(threads.reduce((n, t) => n + t.usage.calls, 0)).toBe(2);
    expect(stats.tokens.prompt + stats.tokens.completion).toBe(usage.totals.total_tokens);
  });

  it('an answer applied later by `replay --apply` is not counted as wasted', async () => {
    h = await Harness.start();
    const strict = (n: number) => ({ ...FAST_RETRY, operations: { story_generate_epic: { validation: { min_stories: n }, on_invalid: { repair: 1 } } } });
    h.writeConfig(strict(9));
    await h.importProject(project('r', 1));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'r', '--epic', 'E1']);
    const failed = await h.waitForEnd(r.thread_id);
    expect(failed.usage).toMatchObject({ calls: 2, wasted_calls: 2 }); // the answer and its repair, both rejected
    await h.stopDaemon();
    h.writeConfig(strict(3));
    await h.json(['replay', r.thread_id, '--apply']);
    const rescued = await h.waitForEnd(r.thread_id);
    expect(rescued.status).toBe('complete');
    expect(rescued.usage).toMatchObject({ calls: 2, wasted_calls: 1 }); // the replayed (newest) answer was used
    expect((await h.cli(['thread', r.thread_id])).stdout).toContain('1 wasted call (');
  });
});

/** A provider that refuses every key (401) and lists no models: what an expired key looks like. */
async function refusingProvider(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((_req, res) => {
    res.writeHead(401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'Incorrect API key provided' } }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, close: () => new Promise((r) => server.close(() => r())) };
}

interface DoctorJson {
  ok: boolean;
  live: boolean;
  checks: { name: string; status: string; message: string; fix: string | null }[];
}
const statusOf = (d: DoctorJson, name: string) => d.checks.find((c) => c.name === name)?.status;

describe('doctor and health', () => {
  it('checks endpoint, key, model, home, disk and daemon without a paid call; --live makes exactly one', async () => {
    h = await Harness.start();
    const env = { COMBINE_MODEL: 'sim-model' };
    const ok = await h.cli(['doctor', '--json'], { env });
    expect(ok.code, ok.stdout).toBe(0);
    const d = JSON.parse(ok.stdout) as DoctorJson;
    for (const name of ['config', 'provider endpoint', 'api key', 'model', 'disk', 'daemon']) expect(statusOf(d, name), name).toBe('ok');
    expect(statusOf(d, 'structured output')).toBe('skip');
    expect(h.sim.calls).toHaveLength(0); // nothing paid

    const live = await h.cli(['doctor', '--live'], { env });
    expect(live.stdout).toContain('it costs a call');
    expect(h.sim.calls).toHaveLength(1);
    expect(live.stdout).toMatch(/(ok|warn) +structured output/);

    const missing = await h.cli(['doctor', '--json']); // test-model is not in the simulator's list
    expect(missing.code).toBe(1);
    const m = JSON.parse(missing.stdout) as DoctorJson;
    expect(m.checks.find((c) => c.name === 'model')).toMatchObject({ status: 'fail', message: expect.stringContaining('it offers: sim-model') });

    const down = await h.cli(['doctor'], { env: { OPENAI_BASE_URL: `http://127.0.0.1:${await unusedPort()}/v1` } });
    expect(down.code).toBe(1);
    expect(down.stdout).toMatch(/fail +provider endpoint +cannot reach/);
    expect(down.stdout).toContain('→ start the server');

    const refusing = await refusingProvider();
    try {
      const bad = await h.cli(['doctor', '--live'], { env: { OPENAI_BASE_URL: refusing.url } });
      expect(bad.code).toBe(1);
      expect(bad.stdout).toMatch(/fail +api key +OPENAI_API_KEY was rejected \(HTTP 401\)/);
      expect(bad.stdout).not.toContain(h.env.OPENAI_API_KEY!);
    } finally {
      await refusing.close();
    }
  });

  it('`health` says when the provider breaker is open, and `doctor` points at it', async () => {
    h = await Harness.start({ faults: [{ kind: 'server_error' }] });
    h.writeConfig({ ...FAST_RETRY, breaker: { failure_threshold: 2, open: '1m' } });
    await h.importProject(project('b', 1));
    await h.json(['generate-epic', '--project', 'b', '--epic', 'E1']);
    let health = await h.cli(['health']);
    for (let i = 0; i < 100 && health.code === 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      health = await h.cli(['health']);
    }
    expect(health.code).toBe(1);
    expect(health.stdout).toMatch(
      /provider breaker OPEN for http:\/\/127\.0\.0\.1:\d+\/v1: 2 failures in a row; no calls until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d/,
    );
    expect(health.stdout).toContain('combine doctor');
    const d = JSON.parse((await h.cli(['doctor', '--json'], { env: { COMBINE_MODEL: 'test-model' } })).stdout) as DoctorJson;
    expect(d.checks.find((c) => c.name === 'daemon')).toMatchObject({ status: 'warn', message: expect.stringContaining('breaker') });
  });
});

describe('completion', () => {
  it('a real bash completes commands, subcommands and options from the generated script', async () => {
    h = await Harness.start();
    const script = join(h.home, 'combine.bash');
    writeFileSync(script, (await h.cli(['completion', 'bash'])).stdout);
    const complete = (words: string[]) =>
      new Promise<string>((resolve) => {
        const line = `source "${script}"; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _combine_completion; echo "\${COMPREPLY[*]}"`;
        const child = spawn('bash', ['-c', line], { stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        child.stdout.on('data', (d) => (out += d));
        child.on('close', () => resolve(out.trim()));
      });
    expect(await complete(['combine', 'thr'])).toBe('threads thread');
    expect((await complete(['combine', 'daemon', 'st'])).split(' ').sort()).toEqual(['start', 'status', 'stop']);
    expect((await complete(['combine', 'threads', '--st'])).split(' ')).toEqual(['--status']);
    expect(await complete(['combine', 'ledger', 've'])).toBe('verify');
    for (const shell of ['zsh', 'fish']) {
      const r = await h.cli(['completion', shell]);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('doctor');
    }
    expect((await h.cli(['completion', 'powershell'])).code).toBe(2);
  });
});
