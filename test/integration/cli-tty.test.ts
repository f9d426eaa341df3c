/**
 * What the CLI does on a terminal (issue 17), driven in a real pseudo-terminal: colour and relative
 * times (and none of either in a pipe or with NO_COLOR / --no-color), tables that fit the width, the
 * progress bar, Ctrl-C while following, and what a failed generate-all ends with.
 */
import stringWidth from 'string-width';
import { afterEach, describe, expect, it } from 'vitest';
import { shortId } from '../../src/domain/short-id.js';
import { FAST_RETRY, Harness, project, type CommandJson, type ThreadJson } from '../helpers/harness.js';
import { plain, runInPty } from '../helpers/pty.js';

const ESC = '\x1b[';
const COLOUR = /\x1b\[3[0-9]m/;

let h: Harness;
afterEach(() => h?.cleanup());

describe('on a terminal', () => {
  it('colours statuses and says times relatively; a pipe, NO_COLOR and --no-color get neither colour nor escapes', async () => {
    h = await Harness.start();
    await h.importProject(project('t', 2));
    const r = await h.json<CommandJson>(['generate-all', '--project', 't']);
    await h.waitForEnd(r.thread_id);

    const tty = await runInPty(['threads'], { env: h.env });
    expect(tty.code).toBe(0);
    expect(tty.output).toMatch(COLOUR);
    expect(tty.output).toContain(`${ESC}32mcomplete`); // green
    expect(plain(tty.output)).toMatch(/(just now|\d+s ago)/);

    for (const run of [await runInPty(['threads'], { env: { ...h.env, NO_COLOR: '1' } }), await runInPty(['threads', '--no-color'], { env: h.env })]) {
      expect(run.code).toBe(0);
      expect(run.output).not.toContain(ESC);
      expect(run.output).toMatch(/(just now|\d+s ago)/); // still a terminal: relative times stay
    }

    const pipe = await h.cli(['threads']);
    expect(pipe.stdout).not.toContain('\x1b');
    expect(pipe.stdout).toMatch(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/);
    expect(pipe.stdout).not.toContain('ago');
    const json = await h.json<ThreadJson[]>(['threads']);
    expect(json[0]!.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('fits tables to the terminal width and aligns wide (CJK) names by display width', async () => {
    h = await Harness.start();
    await h.importProject({ ...project('cjk', 1), name: '日本語のプロジェクト名' });
    await h.importProject({ ...project('plain', 3), name: 'Plain name' });
    await h.importProject({ ...project('cafe', 2), name: 'Café ☕ crème' });
    for (const cols of [60, 200]) {
      const r = await runInPty(['project', 'list'], { env: h.env, cols });
      expect(r.code).toBe(0);
      const lines = plain(r.output)
        .split('\n')
        .filter((l) => l.trim() !== '');
      expect(lines).toHaveLength(4);
      for (const l of lines) expect(stringWidth(l)).toBeLessThanOrEqual(cols);
      // The EPICS column starts at the same display column on every line.
      const epicsAt = lines.map((l) => stringWidth(l.slice(0, l.search(/\s(EPICS|\d)\s/) + 1)));
      expect(new Set(epicsAt).size, lines.join('\n')).toBe(1);
    }
    const wide = plain((await runInPty(['project', 'list'], { env: h.env, cols: 200 })).output);
    expect(wide).toContain('日本語のプロジェクト名');

    // A thread table on a narrow terminal: no line is wider than the terminal.
    await h.json(['generate-epic', '--project', 'plain', '--epic', 'E1']);
    const narrow = await runInPty(['threads'], { env: h.env, cols: 50 });
    for (const l of plain(narrow.output).split('\n')) expect(stringWidth(l)).toBeLessThanOrEqual(50);
    expect(plain(narrow.output)).toContain('…');
  });

  it('Ctrl-C while following: the bar stops, the cursor comes back, the work goes on, exit 130', async () => {
    h = await Harness.start({ faults: [{ kind: 'hang' }] });
    await h.importProject(project('c', 3));
    const r = await runInPty(['generate-all', '--project', 'c', '--follow'], { env: h.env, interruptWhen: (out) => out.includes('0/3 children') });
    expect(r.code).toBe(130);
    const hide = r.output.indexOf(`${ESC}?25l`);
    expect(hide).toBeGreaterThanOrEqual(0);
    expect(r.output.indexOf(`${ESC}?25h`)).toBeGreaterThan(hide); // the cursor is shown again
    const text = plain(r.output);
    const parent = (await h.json<ThreadJson[]>(['threads', '--project', 'c'])).find((t) => t.kind === 'story_generate_all')!;
    expect(text).toContain(`still running — combine thread ${shortId(parent.thread_id)} --follow to re-attach`);
    expect(text).not.toContain('Error');
    // The daemon goes on with it.
    expect((await h.json<ThreadJson>(['thread', parent.thread_id])).status).toMatch(/open|running/);
    expect((await h.json(['daemon', 'status'])).pid).toBeGreaterThan(0);
  });

  it('a failed generate-all ends with the failed children, their error codes and `combine retry`', async () => {
    h = await Harness.start({
      faults: [
        { kind: 'schema_invalid', match: 'Epic id: E2' },
        { kind: 'bad_request', match: 'Epic id: E3' },
      ],
    });
    h.writeConfig(FAST_RETRY);
    await h.importProject(project('f', 4));
    const r = await runInPty(['generate-all', '--project', 'f', '--follow'], { env: h.env });
    expect(r.code).toBe(1);
    expect(r.output).toContain('4/4 children'); // the bar, at its end
    const text = plain(r.output);
    const parent = (await h.json<ThreadJson[]>(['threads', '--project', 'f'])).find((t) => t.kind === 'story_generate_all')!;
    expect(text).toContain('2 children failed:');
    expect(text).toMatch(/✗ epic E2 +[0-9a-f]{8} +SCHEMA_INVALID/);
    expect(text).toMatch(/✗ epic E3 +[0-9a-f]{8} +PROVIDER_ERROR/);
    expect(text).not.toMatch(/✗ epic E1/);
    expect(text).toContain(`next: combine retry ${shortId(parent.thread_id)}`);

    // `thread <parent>` lists the children with their error codes; `ledger <parent>` groups by child.
    const detail = await h.cli(['thread', shortId(parent.thread_id)]);
    expect(detail.stdout).toMatch(/epic E2\s+failed\s+SCHEMA_INVALID/);
    expect(detail.stdout).toMatch(/epic E1\s+complete/);
    expect(detail.stdout).toMatch(/epic E3\s+failed\s+PROVIDER_ERROR/);
    // The JSON contract of `thread` only grows (issue 16: trace and models): the children are listed for people only.
    const json = await h.json(['thread', parent.thread_id]);
    expect(Object.keys(json).sort()).toEqual([
      'child_summary',
      'closed_at',
      'created_at',
      'escalated',
      'escalation',
      'hold',
      'in_doubt',
      'kind',
      'models',
      'parent_thread_id',
      'status',
      'target_ref',
      'thread_id',
      'traceparent',
      'usage',
    ]);
    const ledger = await h.cli(['ledger', parent.thread_id]);
    expect(ledger.code).toBe(0);
    expect(ledger.stdout).not.toContain('no ledger entries yet');
    for (const e of ['E1', 'E2', 'E3', 'E4']) expect(ledger.stdout).toMatch(new RegExp(`── epic ${e} +[0-9a-f]{8} +(complete|failed)`));
    const entries = await h.json<{ thread_id: string }[]>(['ledger', parent.thread_id]);
    expect(new Set(entries.map((e) => e.thread_id)).size).toBe(4);
  });
});
