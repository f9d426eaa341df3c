/**
 * U+0000 (NUL) behaves the same on both backends (issue 18; src/domain/storable-text.ts). Postgres refuses it in
 * text, SQLite stores it, so no NUL is let in: a request holding one is refused at the boundary naming the
 * field (exit 2, HTTP 400), with nothing stored; a model's answer holding one is an invalid answer —
 * recorded and charged once, then repaired or dead-lettered — and never stops other items. Half of a UTF-16
 * surrogate pair (what the JSON escape `\ud800` alone parses to) is not stored as given by either backend
 * (Postgres: U+FFFD; SQLite: bytes that read back as three U+FFFD) and is refused the same way.
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { installOutlineOperation } from '../helpers/operations.js';
import { FAST_RETRY, Harness, project, type CommandJson } from '../helpers/harness.js';
import { startHttpDaemon } from '../helpers/http.js';

let h: Harness;
afterEach(() => h?.cleanup());

const NUL_MESSAGE = /holds the character U\+0000 \(NUL\)/;
const SURROGATE_MESSAGE = /holds half of a UTF-16 surrogate pair/;

describe('a request holding U+0000', () => {
  it('from the CLI is refused with exit 2 naming the field, and nothing is stored', async () => {
    h = await Harness.start();
    await h.importProject(project('p', 1));
    const withNul = project('q', 2);
    withNul.epics[1]!.title = 'Checkout\u0000';
    const file = join(h.home, 'q.json');
    writeFileSync(file, JSON.stringify(withNul)); // the JSON escape `\u0000`
    const imported = await h.cli(['project', 'import', file]);
    expect(imported.code).toBe(2);
    expect(imported.stderr).toMatch(NUL_MESSAGE);
    expect(imported.stderr).toContain('file.epics[1].title');

    const run = await h.cli(['run', 'story_generate_epic', '--input', '{"project_id":"p","epic_id":"E1\\u0000"}']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('input.epic_id');
    expect(run.stderr).toMatch(NUL_MESSAGE);

    expect((await h.query<{ id: string }>('SELECT id FROM projects')).map((p) => p.id)).toEqual(['p']);
    expect(await h.json<unknown[]>(['threads'])).toEqual([]);
  });

  it('over HTTP is a 400 naming the field, in the body, the path or the query', async () => {
    h = await Harness.start();
    await h.importProject(project('p', 1));
    const api = await startHttpDaemon(h);
    const body = await api.request('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'p', epic_id: 'E1\u0000' } });
    expect(body.status).toBe(400);
    expect(JSON.parse(body.text)).toMatchObject({ code: 'BAD_REQUEST', errors: [{ field: 'epic_id', message: expect.stringMatching(NUL_MESSAGE) }] });
    const run = await api.request('POST', '/commands/run/story_generate_epic', { body: { input: { project_id: 'p', epic_id: 'E1' }, note: ['a', 'b\u0000'] } });
    expect(run.status).toBe(400);
    expect(JSON.parse(run.text).errors).toEqual([{ field: 'note[1]', message: expect.stringMatching(NUL_MESSAGE) }]);
    const path = await api.request('GET', '/threads/th%00x');
    expect(path.status).toBe(400);
    expect(JSON.parse(path.text).errors).toEqual([{ field: 'path', message: expect.stringMatching(NUL_MESSAGE) }]);
    const query = await api.request('GET', '/threads?kind=story%00');
    expect(query.status).toBe(400);
    expect(JSON.parse(query.text).errors).toEqual([{ field: 'kind', message: expect.stringMatching(NUL_MESSAGE) }]);
    // Behind a field nested 6,000 levels deep (findUnstorableText keeps its own stack): still the 400, not a 500.
    const deep = `{"input":{"project_id":"p","epic_id":"E1"},"deep":${'['.repeat(6000)}${']'.repeat(6000)},"note":"\\u0000"}`;
    const nested = await api.request('POST', '/commands/run/story_generate_epic', { raw: deep, headers: { 'content-type': 'application/json' } });
    expect(nested.status).toBe(400);
    expect(JSON.parse(nested.text).errors).toEqual([{ field: 'note', message: expect.stringMatching(NUL_MESSAGE) }]);
    expect(await h.json<unknown[]>(['threads'])).toEqual([]);
  });

  it('in config.json: the daemon does not start (exit 2), naming the field', async () => {
    h = await Harness.start();
    await h.stopDaemon();
    h.writeConfig({ provider: { model: 'test\u0000model' } });
    const r = await h.cli(['daemon', 'start']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('provider.model');
    expect(r.stderr).toMatch(NUL_MESSAGE);
  });

  it('in an imported ledger export is refused with exit 2 naming the row and field, and nothing is imported', async () => {
    h = await Harness.start();
    await h.importProject(project('p', 1));
    const r = await h.json<CommandJson>(['generate-epic', '--project', 'p', '--epic', 'E1']);
    await h.waitForEnd(r.thread_id);
    const exported = await h.cli(['ledger', 'export', r.thread_id]);
    // A row as an older SQLite home could hold it (Postgres never could), the file's digest made anew.
    const lines = exported.stdout.trim().split('\n').slice(0, -1);
    const at = lines.findIndex((l) => JSON.parse(l).record === 'thread');
    lines[at] = JSON.stringify({ ...JSON.parse(lines[at]!), created_by: 'ci\u0000bot' });
    const end = JSON.parse(exported.stdout.trim().split('\n').at(-1)!);
    const digest = createHash('sha256');
    for (const l of lines) digest.update(l).update('\n');
    const file = join(h.home, 'nul.jsonl');
    writeFileSync(file, [...lines, JSON.stringify({ ...end, digest: digest.digest('hex') })].join('\n'));
    const imported = await h.cli(['ledger', 'import', file]);
    expect(imported.code).toBe(2);
    expect(imported.stderr).toContain('threads[0].created_by');
    expect(imported.stderr).toMatch(NUL_MESSAGE);
    expect(await h.queryOne('SELECT count(*) AS n FROM llm_ledger_imports')).toEqual({ n: 0 });
  });
});

describe('a request or answer holding half of a surrogate pair', () => {
  it('is refused like a NUL: the CLI (exit 2), the HTTP API (400), a project file, naming the field; nothing stored', async () => {
    h = await Harness.start();
    await h.importProject(project('p', 1));
    const run = await h.cli(['run', 'story_generate_epic', '--input', '{"project_id":"p","epic_id":"E1\\ud800"}']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('input.epic_id');
    expect(run.stderr).toMatch(SURROGATE_MESSAGE);
    const withHalf = project('q', 2);
    withHalf.epics[1]!.title = 'Checkout \udc00';
    const file = join(h.home, 'q.json');
    writeFileSync(file, JSON.stringify(withHalf)); // the JSON escape `\udc00`
    const imported = await h.cli(['project', 'import', file]);
    expect(imported.code).toBe(2);
    expect(imported.stderr).toContain('file.epics[1].title');
    expect(imported.stderr).toMatch(SURROGATE_MESSAGE);
    const api = await startHttpDaemon(h);
    // Two epic ids that Postgres would both have stored as 'E1\ufffd' (one request's identity): each refused.
    for (const epic of ['E1\ud800', 'E1\udbff']) {
      const r = await api.request('POST', '/commands/story-backlog/generate-epic', { body: { project_id: 'p', epic_id: epic } });
      expect(r.status).toBe(400);
      expect(JSON.parse(r.text).errors).toEqual([{ field: 'epic_id', message: expect.stringMatching(SURROGATE_MESSAGE) }]);
    }
    expect((await h.query<{ id: string }>('SELECT id FROM projects')).map((p) => p.id)).toEqual(['p']);
    expect(await h.json<unknown[]>(['threads'])).toEqual([]);
  });

  it("in a model's story title, with repair allowed: an invalid answer naming the field, the repair applied", async () => {
    h = await Harness.start();
    h.writeConfig({ ...FAST_RETRY, operations: { story_generate_epic: { on_invalid: { repair: 1 } } } });
    await h.importProject(project('p', 2));
    h.setFaults([{ kind: 'append_text', text: 'Sign in \ud83d', match: 'Epic id: E2', times: 1 }]);
    const all = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    const end = await h.waitForEnd(all.thread_id);
    expect(end.status).toBe('complete');
    const backlog = JSON.stringify(await h.json<unknown>(['backlog', 'p']));
    expect(backlog).not.toMatch(/\\ud83d|\ufffd/i);
    const errors = await h.query<{ payload: string }>("SELECT payload FROM llm_ledger_entries WHERE entry_type = 'error'");
    expect(errors.map((e) => JSON.parse(e.payload))).toEqual([
      expect.objectContaining({ code: 'SCHEMA_INVALID', next: 'repair', message: expect.stringMatching(SURROGATE_MESSAGE) }),
    ]);
    expect((await h.cli(['ledger', 'verify'])).code).toBe(0);
  });
});

describe("a model's answer holding U+0000", () => {
  async function setup(config: object): Promise<void> {
    h = await Harness.start();
    // Its document in parts keyed by a field of the answer: a NUL there would become a part's key.
    installOutlineOperation(h.home);
    h.writeConfig(config);
    await h.importProject(project('p', 3));
    await h.importProject(project('q', 1));
  }

  async function ledgerOf(threadId: string): Promise<{ entry_type: string; payload: any }[]> {
    return await h.json<any[]>(['ledger', threadId]);
  }

  it('where it would become a document part key: recorded, charged once, dead-lettered naming the field; other items run', async () => {
    await setup(FAST_RETRY);
    h.setFaults([{ kind: 'append_text', text: '\u0000', match: 'Outline of Project p' }]);
    const bad = await h.json<CommandJson>(['run', 'outline', '--input', '{"project_id":"p"}']);
    const good = await h.json<CommandJson>(['run', 'outline', '--input', '{"project_id":"q"}']);
    const end = await h.waitForEnd(bad.thread_id);
    expect(end.status).toBe('failed');
    expect(end.usage).toMatchObject({ calls: 1, wasted_calls: 1 });
    expect((await h.waitForEnd(good.thread_id)).status).toBe('complete');
    const ledger = await ledgerOf(bad.thread_id);
    expect(ledger.map((e) => e.entry_type)).toEqual(['prompt', 'response', 'parse_report', 'error']);
    // The answer is kept as received: `replay` can show it, and apply it once the operation copes.
    expect(JSON.parse(ledger[1]!.payload.body.choices[0].message.content).sections[0].name).toContain('\u0000');
    const error = ledger[3]!.payload;
    expect(error).toMatchObject({ code: 'SCHEMA_INVALID', class: 'permanent', next: 'dead_letter' });
    expect(error.message).toContain('sections[0].name');
    expect(error.message).toMatch(NUL_MESSAGE);
    const [item] = await h.query<{ status: string; error_message: string }>('SELECT status, error_message FROM llm_work_items WHERE thread_id = ?', [
      bad.thread_id,
    ]);
    expect(item).toMatchObject({ status: 'dead_letter', error_message: expect.stringMatching(NUL_MESSAGE) });
    expect(await h.cli(['doc', 'p', 'outline'])).toMatchObject({ code: 2 });
  });

  it('in a story title, with repair allowed: the repair answer is applied, and the generate-all completes', async () => {
    await setup({ ...FAST_RETRY, operations: { story_generate_epic: { on_invalid: { repair: 1 } } } });
    h.setFaults([{ kind: 'append_text', text: 'Sign\u0000in', match: 'Epic id: E2', times: 1 }]);
    const all = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    const end = await h.waitForEnd(all.thread_id);
    expect(end.status).toBe('complete');
    expect(end.child_summary).toEqual({ complete: 3 });
    const backlog = await h.json<any>(['backlog', 'p']);
    expect(JSON.stringify(backlog)).not.toContain('\\u0000');
    const errors = await h.query<{ payload: string }>("SELECT payload FROM llm_ledger_entries WHERE entry_type = 'error'");
    expect(errors.map((e) => JSON.parse(e.payload))).toEqual([
      expect.objectContaining({ code: 'SCHEMA_INVALID', next: 'repair', message: expect.stringContaining('stories[0].title') }),
    ]);
  });

  it("in a provider's error message: kept with the NUL written as \\u0000, and the other items run", async () => {
    await setup(FAST_RETRY);
    h.setFaults([{ kind: 'bad_request', text: 'bad byte \u0000 at 7', match: 'Epic id: E2' }]);
    const all = await h.json<CommandJson>(['generate-all', '--project', 'p']);
    const end = await h.waitForEnd(all.thread_id);
    expect(end.child_summary).toEqual({ complete: 2, failed: 1 });
    const failed = await h.query<{ error_code: string; error_message: string }>(
      "SELECT error_code, error_message FROM llm_work_items WHERE status = 'dead_letter'",
    );
    expect(failed).toEqual([{ error_code: 'PROVIDER_ERROR', error_message: expect.stringContaining('bad byte \\u0000 at 7') }]);
  });
});
