/**
 * A user's own operation, dropped into COMBINE_HOME/operations/ with no edit in src/: the example
 * module runs through the real CLI, daemon, socket, SQLite file and simulator with every guarantee —
 * idempotency, --force, a SIGKILL with its call in flight, a crash after its answer was recorded.
 */
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Harness, project, ROOT, waitUntil, type CommandJson, type ThreadJson } from '../helpers/harness.js';

const EXAMPLE = join(ROOT, 'examples', 'operations', 'release_notes.mjs');
const INPUT = { project_id: 'acme', version: '1.2.0', changes: ['Fix login on Safari', 'Export orders as CSV'] };

let h: Harness;
afterEach(() => h?.cleanup());

async function withExample(): Promise<Harness> {
  const harness = await Harness.start();
  mkdirSync(join(harness.home, 'operations'));
  copyFileSync(EXAMPLE, join(harness.home, 'operations', 'release_notes.mjs'));
  await harness.importProject(project('acme', 1));
  return harness;
}

function lastLine(stdout: string): ThreadJson {
  const lines = stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]!) as ThreadJson;
}

const releaseCalls = () => h.sim.calls.filter((c) => c.operation === 'release_notes');

describe('an operation of your own', () => {
  it('runs, is readable with `doc`, deduplicates an identical request and runs again with --force', async () => {
    h = await withExample();
    const listed = await h.json<{ name: string; source: string; model: string; description: string }[]>(['operations']);
    expect(listed.find((o) => o.name === 'release_notes')).toEqual({
      name: 'release_notes',
      description: 'Write the release notes of one version of a project from the list of its changes',
      source: join(h.home, 'operations', 'release_notes.mjs'),
      model: 'default',
    });
    expect(listed.find((o) => o.name === 'story_generate_epic')).toMatchObject({ source: 'builtin' });

    const followed = await h.cli(['run', 'release_notes', '--input', JSON.stringify(INPUT), '--follow', '--json']);
    expect(followed.code, followed.stderr).toBe(0);
    const first = JSON.parse(followed.stdout.trim().split('\n')[0]!) as CommandJson;
    expect(first).toEqual({ thread_id: expect.any(String), status: 'open', deduplicated: false });
    const final = lastLine(followed.stdout);
    expect(final).toMatchObject({ thread_id: first.thread_id, kind: 'release_notes', status: 'complete', child_summary: null });
    expect(final.target_ref).toEqual({ doc_type: 'release_notes', project_id: 'acme', key: '1.2.0' });
    expect(releaseCalls()).toHaveLength(1);

    const doc = await h.json(['doc', 'acme', 'release_notes', '--key', '1.2.0']);
    expect(Object.keys(doc).sort()).toEqual(['content', 'doc_type', 'key', 'project_id', 'updated_at', 'version']);
    expect(doc).toMatchObject({ project_id: 'acme', doc_type: 'release_notes', key: '1.2.0', version: 1 });
    expect(doc.content).toMatchObject({ version: '1.2.0', headline: expect.any(String), changes: INPUT.changes });
    expect(doc.content.sections.length).toBeGreaterThan(0);

    const ledger = await h.json<any[]>(['ledger', first.thread_id]);
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);
    expect(ledger[0].payload.request.response_format.json_schema.name).toBe('release_notes');
    expect(ledger[2].summary).toMatch(/^valid: \d+ sections$/);
    expect(ledger[3].payload).toMatchObject({
      doc_type: 'release_notes',
      key: '1.2.0',
      from_version: 0,
      to_version: 1,
      summary: { version: '1.2.0', rewritten: false },
    });

    const again = await h.json<CommandJson>(['run', 'release_notes', '--input', JSON.stringify(INPUT)]);
    expect(again).toEqual({ thread_id: first.thread_id, status: 'complete', deduplicated: true });
    expect(releaseCalls()).toHaveLength(1);

    const forced = await h.json<CommandJson>(['run', 'release_notes', '--input', JSON.stringify(INPUT), '--force']);
    expect(forced.thread_id).not.toBe(first.thread_id);
    expect((await h.waitForEnd(forced.thread_id)).status).toBe('complete');
    expect(releaseCalls()).toHaveLength(2);
    expect(await h.json(['doc', 'acme', 'release_notes', '--key', '1.2.0'])).toMatchObject({ version: 2, content: { version: '1.2.0' } });
    expect((await h.json(['ledger', 'verify'])).ok).toBe(true);
  });

  it('refuses bad input with exit 2 naming the field, and stores nothing', async () => {
    h = await withExample();
    const cases: [string[], RegExp][] = [
      [['run', 'release_notes', '--input', JSON.stringify({ ...INPUT, changes: [] })], /input\.changes: must NOT have fewer than 1 items/],
      [['run', 'release_notes', '--input', JSON.stringify({ project_id: 'acme', version: '1.2.0' })], /input\.changes: is required/],
      [['run', 'release_notes', '--input', JSON.stringify({ ...INPUT, extra: 1 })], /input\.extra: is not allowed/],
      [['run', 'release_notes', '--input', '{not json'], /--input: not valid JSON/],
      [['run', 'no_such_operation', '--input', '{}'], /no operation "no_such_operation"/],
      [['run', 'release_notes', '--input', JSON.stringify({ ...INPUT, project_id: 'nope' })], /no project "nope"/],
    ];
    for (const [args, message] of cases) {
      const r = await h.cli(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    expect(await h.json(['threads'])).toEqual([]);
    expect(h.sim.calls).toHaveLength(0);
  });

  it('survives SIGKILL with its call in flight: one mutation, and the recorded answer is never paid for again', async () => {
    h = await withExample();
    h.setFaults([{ kind: 'hang', hang_ms: 60_000, times: 1 }]);
    const r = await h.json<CommandJson>(['run', 'release_notes', '--input', JSON.stringify(INPUT)]);
    await waitUntil(() => releaseCalls().length === 1, 'the call to be in flight');
    await h.killDaemon();
    // The call was in flight: recorded INTERRUPTED at restart and sent again, once.
    const end = await h.waitForEnd(r.thread_id);
    expect(end.status).toBe('complete');
    expect(releaseCalls()).toHaveLength(2);
    expect(await h.queryOne('SELECT count(*) AS n FROM mutations WHERE thread_id = ?', [r.thread_id])).toEqual({ n: 1 });
    const errors = (await h.json<any[]>(['ledger', r.thread_id])).filter((e) => e.entry_type === 'error');
    expect(errors.map((e) => e.payload.code)).toEqual(['INTERRUPTED']);

    // Killed right after the answer was recorded: the restart applies it without a second call.
    await h.stopDaemon();
    await h.startDaemon({ COMBINE_CRASH_AT: 'after_response' });
    const v2 = { ...INPUT, version: '1.3.0' };
    const crashed = await h.json<CommandJson>(['run', 'release_notes', '--input', JSON.stringify(v2)]);
    await waitUntil(() => h.daemonPid() === null || !isRunning(h.daemonPid()!), 'the daemon to crash after the response', 20_000);
    await h.startDaemon();
    expect((await h.waitForEnd(crashed.thread_id)).status).toBe('complete');
    expect(releaseCalls()).toHaveLength(3);
    const entries = await h.json<any[]>(['ledger', crashed.thread_id]);
    expect(entries.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'mutation_report']);
    expect(entries[2].payload.resumed).toBe(true);
    expect(await h.json(['doc', 'acme', 'release_notes', '--key', '1.3.0'])).toMatchObject({ version: 1 });
  });
});

describe('a schedule of your own operation', () => {
  it('fills its input template per period and writes the document; a bad template is refused with exit 2', async () => {
    h = await withExample();
    const bad = await h.cli([
      'schedule',
      'add',
      '--project',
      'acme',
      '--operation',
      'release_notes',
      '--input',
      '{"version":"{{date}}"}',
      '--cron',
      '* * * * * *',
    ]);
    expect(bad.code, bad.stderr).toBe(2);
    expect(bad.stderr).toMatch(/--input\.changes: is required/);
    const s = await h.json([
      'schedule',
      'add',
      '--project',
      'acme',
      '--operation',
      'release_notes',
      '--input',
      '{"version":"nightly-{{date}}","changes":["Nightly build"]}',
      '--cron',
      '* * * * * *',
    ]);
    expect(s).toMatchObject({ operation: 'release_notes', input: { version: 'nightly-{{date}}', changes: ['Nightly build'] } });
    const run = await waitUntil(
      async () => (await h.json<any[]>(['schedule', 'runs', s.schedule_id])).find((r) => r.status === 'complete'),
      'a scheduled run to complete',
    );
    await h.json(['schedule', 'remove', s.schedule_id]);
    const date = new Date(run.period_key).toISOString().slice(0, 10);
    // Every period of the day writes the same key: on a loaded machine more than one may have run
    // before the schedule was removed, each a new version.
    const doc = await h.json(['doc', 'acme', 'release_notes', '--key', `nightly-${date}`]);
    expect(doc).toMatchObject({ content: { changes: ['Nightly build'] } });
    expect(doc.version).toBeGreaterThanOrEqual(1);
  });
});

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('a module that is not a valid operation', () => {
  const broken: [string, string, RegExp][] = [
    [
      'missing_output.mjs',
      `export default { name: 'x_notes', description: 'd', input: { type: 'object' }, identity: () => ({}), lockScope: () => 'x', target: () => ({}), prompt: () => ({ messages: [] }), apply: () => ({}) };`,
      /missing_output\.mjs: output: must be a JSON Schema object/,
    ],
    [
      'bad_schema.mjs',
      `export default { name: 'x_notes', description: 'd', input: { type: 'object', properties: { a: { type: 'strng' } } }, identity: () => ({}), lockScope: () => 'x', target: () => ({}), prompt: () => ({ messages: [] }), output: { type: 'object' }, apply: () => ({}) };`,
      /bad_schema\.mjs: input: is not a valid JSON Schema/,
    ],
    ['bad_name.mjs', `export default { name: 'Release Notes', description: 'd' };`, /bad_name\.mjs: name: must be a snake_case name/],
    [
      'duplicate.mjs',
      `export default { name: 'story_generate_epic', description: 'd', input: { type: 'object' }, identity: () => ({}), lockScope: () => 'x', target: () => ({}), prompt: () => ({ messages: [] }), output: { type: 'object' }, apply: () => ({}) };`,
      /duplicate\.mjs: name: "story_generate_epic" is already defined by builtin/,
    ],
    ['syntax.mjs', `export default {`, /syntax\.mjs: module: cannot be loaded/],
  ];

  it('stops `daemon start` with exit 2 naming the file and the field; `operations check` says the same without a daemon', async () => {
    h = await Harness.start();
    mkdirSync(join(h.home, 'operations'));
    for (const [file, source, message] of broken) {
      const path = join(h.home, 'operations', file);
      writeFileSync(path, source);
      const start = await h.cli(['daemon', 'start']);
      expect(start.code, `${file}: ${start.stderr}`).toBe(2);
      expect(start.stderr).toMatch(message);
      const check = await h.cli(['operations', 'check', path]);
      expect(check.code, check.stderr).toBe(2);
      expect(check.stderr).toMatch(message);
      rmSync(path);
    }
    const good = await h.cli(['operations', 'check', EXAMPLE, '--json']);
    expect(good.code, good.stderr).toBe(0);
    expect(JSON.parse(good.stdout)).toMatchObject({ ok: true, name: 'release_notes', role: 'call', warnings: [] });
    expect(h.daemonPid()).toBeNull();
  });

  it('config that names an unknown operation or a rule it does not declare stops the daemon with exit 2', async () => {
    h = await Harness.start();
    h.writeConfig({ operations: { no_such_op: { retry: { max_attempts: 2 } } } });
    const unknown = await h.cli(['daemon', 'start']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/operations\.no_such_op: no operation "no_such_op" is loaded/);
    h.writeConfig({ operations: { story_generate_epic: { validation: { min_storys: 2 } } } });
    const rule = await h.cli(['daemon', 'start']);
    expect(rule.code).toBe(2);
    expect(rule.stderr).toMatch(/operations\.story_generate_epic\.validation\.min_storys: is not allowed/);
  });
});
