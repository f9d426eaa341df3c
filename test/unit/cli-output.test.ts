/** The CLI's pure pieces: short ids, prefix ranges, times, plurals, colour rules, suggestions, completion. */
import { describe, expect, it } from 'vitest';
import { completionScript, completionTree } from '../../src/cli/completion.js';
import { colorEnabled, plural, relativeTime, table } from '../../src/cli/output.js';
import { buildProgram } from '../../src/cli/program.js';
import { commandPaths, suggestCommands } from '../../src/cli/suggest.js';
import { newId } from '../../src/core/ids.js';
import { distinctShortIds, prefixRange, shortId } from '../../src/domain/short-id.js';

describe('short ids', () => {
  it('are the random tail, so ids made in the same millisecond differ', () => {
    const now = Date.now();
    const ids = Array.from({ length: 200 }, () => newId(now));
    expect(new Set(ids.map((id) => id.slice(0, 8))).size).toBe(1); // the old short id: all the same
    const shorts = ids.map((id) => shortId(id));
    expect(new Set(shorts).size).toBe(200);
    for (const [i, s] of shorts.entries()) expect(ids[i]!.slice(24, 32)).toBe(s);
  });

  it('grow where two collide in one table, so each row can be typed back', () => {
    const a = '01a209d3-5c2a-7a13-8f00-9f3c2a1b7e4d';
    const b = '01a209d3-5c2a-7a14-8f00-9f3c2a1bffff';
    const c = '01a209d3-5c2a-7a15-8f00-12345678abcd';
    const m = distinctShortIds([a, b, c]);
    expect(m.get(c)).toBe('12345678');
    expect(m.get(a)).toBe('9f3c2a1b7e4d');
    expect(m.get(b)).toBe('9f3c2a1bffff');
  });

  it('a prefix range covers exactly the ids that start with it', () => {
    const { lo, hi } = prefixRange('9f3c');
    expect(lo).toBe('9f3c');
    expect(hi).toBe('9f3d');
    for (const id of ['9f3c', '9f3c0000', '9f3cffff']) expect(id >= lo && id < hi).toBe(true);
    for (const id of ['9f3b', '9f3d', '9f4']) expect(id >= lo && id < hi).toBe(false);
    expect(prefixRange('01a2-').hi).toBe('01a2.');
  });
});

describe('output', () => {
  it('says relative times and plurals the way people do', () => {
    const now = Date.parse('2026-11-23T12:00:00Z');
    expect(relativeTime('2026-11-23T11:57:00Z', now)).toBe('3m ago');
    expect(relativeTime('2026-11-23T09:00:00Z', now)).toBe('3h ago');
    expect(relativeTime('2026-11-23T12:00:02Z', now)).toBe('just now');
    expect(relativeTime('2026-11-23T14:00:00Z', now)).toBe('in 2h');
    expect(relativeTime('2026-01-01T00:00:00Z', now)).toBe('2026-01-01');
    expect(plural(1, 'epic')).toBe('1 epic');
    expect(plural(3, 'epic')).toBe('3 epics');
    expect(plural(2, 'entry', 'entries')).toBe('2 entries');
  });

  it('colours only a terminal, never with NO_COLOR or --no-color', () => {
    const tty = { isTTY: true } as NodeJS.WriteStream;
    const pipe = { isTTY: false } as NodeJS.WriteStream;
    expect(colorEnabled(tty, {}, [])).toBe(true);
    expect(colorEnabled(pipe, {}, [])).toBe(false);
    expect(colorEnabled(tty, { NO_COLOR: '1' }, [])).toBe(false);
    expect(colorEnabled(tty, {}, ['node', 'combine', 'threads', '--no-color'])).toBe(false);
    expect(colorEnabled(tty, { TERM: 'dumb' }, [])).toBe(false);
    expect(colorEnabled(pipe, { FORCE_COLOR: '1' }, [])).toBe(true);
  });

  it('fits a table to a width by cutting its widest column', () => {
    const rows = [
      ['ID', 'KIND', 'NOTE'],
      ['a1', 'story_generate_epic', 'ok'],
      ['b2', 'x', 'a very long note that does not fit in a narrow terminal at all'],
    ];
    const wide = table(rows, Infinity).split('\n');
    expect(wide[2]).toContain('a very long note that does not fit in a narrow terminal at all');
    const narrow = table(rows, 40).split('\n');
    for (const line of narrow) expect(line.length).toBeLessThanOrEqual(40);
    expect(narrow[2]).toContain('…');
    expect(narrow[1]).toContain('story_generate_epic'); // the widest column was cut, not the others
  });
});

describe('unknown commands', () => {
  const program = buildProgram();
  it('are answered by meaning first, then by spelling', () => {
    expect(suggestCommands('status', program).slice(0, 2)).toEqual(['daemon status', 'health']);
    expect(suggestCommands('kill', program)).toContain('cancel');
    expect(suggestCommands('thraeds', program)).toContain('threads');
    expect(suggestCommands('verfy', program)).toContain('ledger verify');
    expect(suggestCommands('zzzzzzzz', program)).toEqual([]);
  });
});

describe('completion', () => {
  const program = buildProgram();
  it('lists every command of the tree, with its options, in each shell', () => {
    const paths = commandPaths(program);
    expect(paths).toEqual(expect.arrayContaining(['threads', 'daemon status', 'ledger verify', 'schedule runs', 'doctor', 'completion']));
    const nodes = completionTree(program);
    expect(nodes.map((n) => n.path)).toEqual(['root', ...paths.map((p) => `root/${p.replace(/ /g, '/')}`)]);
    const threads = nodes.find((n) => n.path === 'root/threads')!;
    expect(threads.candidates.map((c) => c.word)).toEqual(expect.arrayContaining(['--status', '--kind', '--parent', '--since', '--cursor', '--json']));
    for (const shell of ['bash', 'zsh', 'fish'] as const) {
      const script = completionScript(shell, program);
      for (const p of paths) expect(script, `${shell}: ${p}`).toContain(`root/${p.replace(/ /g, '/')}`);
    }
  });

  it('picks up a command added to the tree after the fact', () => {
    const p = buildProgram();
    p.command('brand-new').option('--shiny', 'a new option');
    expect(completionScript('bash', p)).toContain('root/brand-new) words=');
    expect(completionScript('fish', p)).toContain("-l 'shiny'");
  });
});
