/**
 * `combine ledger export` → `combine ledger import` into a fresh COMBINE_HOME: the slice verifies
 * there (each entry's hash, links between neighbours, the digest), keeps each entry's original hash,
 * and never answers a request in the new home. A changed or truncated file imports nothing.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, waitUntil, type CommandJson, type ThreadJson } from '../helpers/harness.js';

let a: Harness;
let b: Harness | undefined;
afterEach(async () => {
  await a?.cleanup();
  await b?.cleanup();
  b = undefined;
});

/** Home A: a generate-all over 2 epics (E2 repaired once) with another thread's entries interleaved. */
async function homeWithHistory() {
  a = await Harness.start({ latencyMs: 30 });
  a.writeConfig({ ...FAST_RETRY, operations: { story_generate_epic: { on_invalid: { repair: 1 } } } });
  a.setFaults([
    { kind: 'schema_invalid', match: 'Epic id: E2', times: 1 },
    // p's E1 answers late: q's thread, started while that call is in flight, records its entries in between.
    { kind: 'hang', match: 'Epic id: E1', hang_ms: 3000, times: 1 },
  ]);
  await a.importProject(project('p', 2));
  await a.importProject(project('q', 1));
  const all = await a.json<CommandJson>(['generate-all', '--project', 'p']);
  await waitUntil(() => a.sim.calls.some((c) => c.epic_id === 'E1'), 'p’s E1 call to be in flight');
  const other = await a.json<CommandJson>(['generate-epic', '--project', 'q', '--epic', 'E1']);
  expect((await a.waitForEnd(all.thread_id)).status).toBe('complete');
  expect((await a.waitForEnd(other.thread_id)).status).toBe('complete');
  return all.thread_id;
}

function readLines(file: string): any[] {
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

describe('ledger export and import', () => {
  it('an exported generate-all imports into a fresh home and verifies there, keeping the source hashes', async () => {
    const parent = await homeWithHistory();
    const file = join(a.home, 'all.jsonl');
    const summary = await a.json(['ledger', 'export', parent, '--out', file]);
    expect(summary).toMatchObject({ file, threads: 3, skipped: [] });
    const lines = readLines(file);
    expect(lines[0]).toMatchObject({ record: 'header', format: 'combine-ledger-export', version: 1, scope: { thread_id: parent } });
    expect(lines.at(-1)).toMatchObject({ record: 'end', threads: 3, entries: summary.entries });
    const children = (await a.json<ThreadJson[]>(['threads', '--project', 'p'])).filter((t) => t.parent_thread_id === parent);
    const sourceLedgers = await Promise.all(children.map((c) => a.json<any[]>(['ledger', c.thread_id])));
    expect(summary.entries).toBe(sourceLedgers.flat().length);
    // The slice is not contiguous: the other project's thread ran in between.
    const seqs = lines.filter((l) => l.record === 'entry').map((l) => l.seq);
    expect(seqs.some((s, i) => i > 0 && s !== seqs[i - 1] + 1)).toBe(true);

    b = await Harness.start();
    const imported = await b.json(['ledger', 'import', file]);
    expect(imported).toMatchObject({ result: 'imported', threads: 3, work_items: 2, entries: summary.entries, first_seq: 1, last_seq: summary.entries });
    expect(imported.linked).toBeGreaterThan(0);
    const verify = await b.json(['ledger', 'verify']);
    expect(verify).toMatchObject({
      ok: true,
      entries: summary.entries,
      first_break: null,
      incomplete: [],
      imported: { entries: summary.entries, first_mismatch: null },
    });

    for (const [i, child] of children.entries()) {
      const there = await b.json<any[]>(['ledger', child.thread_id]);
      const here = sourceLedgers[i]!;
      expect(there.map((e) => [e.entry_type, e.payload, e.created_at])).toEqual(here.map((e) => [e.entry_type, e.payload, e.created_at]));
      expect(there.map((e) => e.imported_from)).toEqual(here.map((e) => ({ seq: e.seq, prev_hash: e.prev_hash, hash: e.hash })));
    }
    const thread = await b.json(['thread', parent]);
    expect(thread).toMatchObject({ status: 'complete', child_summary: { complete: 2 } });

    // Importing the same file again is recognised and changes nothing.
    expect(await b.json(['ledger', 'import', file])).toMatchObject({ result: 'already_imported' });
    expect((await b.json(['ledger', 'verify'])).entries).toBe(summary.entries);

    // Imported history never answers a request here: that work was applied to another home's documents.
    await b.importProject(project('p', 2));
    const fresh = await b.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    expect(fresh.deduplicated).toBe(false);
    expect((await b.waitForEnd(fresh.thread_id)).status).toBe('complete');
    expect(b.sim.calls).toHaveLength(1);
    expect((await b.json(['ledger', 'verify'])).ok).toBe(true);
  });

  it('exports a whole project; a changed entry, a changed thread line or a truncated file imports nothing', async () => {
    await homeWithHistory();
    const file = join(a.home, 'p.jsonl');
    const summary = await a.json(['ledger', 'export', '--project', 'p', '--out', file]);
    expect(summary.threads).toBe(3);
    const text = readFileSync(file, 'utf8');
    const lines = text.trim().split('\n');
    b = await Harness.start();

    const tamper = async (name: string, content: string) => {
      const path = join(b!.home, name);
      writeFileSync(path, content);
      return b!.cli(['ledger', 'import', path]);
    };
    // One byte of a response payload: the entry is named.
    const at = lines.findIndex((l) => l.includes('"entry_type":"response"'));
    const entry = JSON.parse(lines[at]!);
    const changed = [...lines];
    changed[at] = lines[at]!.replace(/sim-req-(\d)/, 'sim-req-9$1');
    expect(changed[at]).not.toBe(lines[at]);
    const r1 = await tamper('changed.jsonl', changed.join('\n'));
    expect(r1.code).toBe(1);
    expect(r1.stderr).toContain(`entry ${entry.seq}: hash does not match the entry contents`);
    expect(r1.stderr).toContain('nothing was imported');

    // A thread line is not hashed by the chain, but the digest covers it.
    const thread = lines.findIndex((l) => l.includes('"record":"thread"'));
    const r2 = await tamper(
      'thread.jsonl',
      [...lines.slice(0, thread), lines[thread]!.replace('"complete"', '"failed"'), ...lines.slice(thread + 1)].join('\n'),
    );
    expect(r2.code).toBe(1);
    expect(r2.stderr).toContain('the digest does not match');

    const r3 = await tamper('truncated.jsonl', lines.slice(0, -3).join('\n'));
    expect(r3.code).toBe(1);
    expect(r3.stderr).toContain('truncated');

    const r4 = await tamper('other.jsonl', '{"hello":"world"}\n');
    expect(r4.code).toBe(2);
    expect(r4.stderr).toContain('not a valid ledger export');

    expect(await b.json(['threads'])).toEqual([]);
    expect(await b.json(['ledger', 'verify'])).toMatchObject({ ok: true, entries: 0 });
    expect((await b.json(['ledger', 'import', file])).result).toBe('imported');
  });

  it('names bad usage: both or neither of thread id and --project, unknown ids, an unreadable file', async () => {
    a = await Harness.start();
    const both = await a.cli(['ledger', 'export', 'x', '--project', 'p']);
    expect(both.code).toBe(2);
    const none = await a.cli(['ledger', 'export']);
    expect(none.code).toBe(2);
    const unknown = await a.cli(['ledger', 'export', 'no-such-thread']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no thread "no-such-thread"');
    const missing = await a.cli(['ledger', 'import', join(a.home, 'nope.jsonl')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot read');
  });
});
