/**
 * Secrets stay out (issue 14, item 4): a provider that echoes the API key — in its answer, its request
 * id, a rate-limit header, or a body that is not even JSON — gets it recorded nowhere: not in the
 * ledger (which can never be changed), the call records, the logs, the WAL or an export — nor in any
 * stored row, on either backend (on Postgres the database is not a file under the home).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FAST_RETRY, Harness, project, TEST_BACKEND, type CommandJson } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    const st = statSync(p);
    return st.isDirectory() ? filesUnder(p) : st.isFile() ? [p] : []; // not the socket
  });
}

/** Files (under the home and the export) whose bytes contain `secret`. */
function filesContaining(secret: string, extra: string[]): string[] {
  const needle = Buffer.from(secret);
  return [...filesUnder(h.home), ...extra].filter((f) => readFileSync(f).includes(needle));
}

/** Tables (`table.column…`) of the stored state whose rows, as text, contain `secret`. */
async function tablesContaining(secret: string): Promise<string[]> {
  const tables =
    TEST_BACKEND === 'postgres'
      ? await h.query<{ name: string }>("SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'")
      : await h.query<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'");
  expect(tables.map((t) => t.name)).toContain('llm_ledger_entries');
  const found: string[] = [];
  for (const { name } of tables) {
    const rows = await h.query(`SELECT * FROM "${name}"`);
    if (JSON.stringify(rows).includes(secret)) found.push(name);
  }
  return found;
}

describe('a provider that echoes the credentials', () => {
  it('gets the API key recorded nowhere under COMBINE_HOME nor in an export; the answers still apply', async () => {
    h = await Harness.start();
    h.writeConfig(FAST_RETRY);
    await h.importProject(project('p', 2));
    await echoedAndNowhere([]);
  });

  it('the same for every secret the config names (redact.env)', async () => {
    h = await Harness.start();
    const other = 'other-secret-value-0123456789';
    h.env.OTHER_SECRET = other;
    h.writeConfig({ ...FAST_RETRY, redact: { env: ['OTHER_SECRET'] } });
    await h.importProject(project('p', 2));
    await echoedAndNowhere([other]);
  });
});

/** A generate-all against a provider echoing the key and `others`; then every file is searched for them. */
async function echoedAndNowhere(others: string[]): Promise<void> {
  const text = others.join(' ');
  h.setFaults([
    { kind: 'echo_secret', ...(text ? { text } : {}), malformed: true, times: 1 },
    { kind: 'echo_secret', ...(text ? { text } : {}) },
  ]);
  const all = await h.json<CommandJson>(['generate-all', '--project', 'p']);
  expect((await h.waitForEnd(all.thread_id)).status).toBe('complete');
  const key = h.env.OPENAI_API_KEY!;
  expect(h.sim.calls).toHaveLength(3);
  const echoed = ['[redacted]', ...others.map(() => '[redacted]')].join(' ');

  const ids = (await h.json<{ thread_id: string }[]>(['threads'])).map((t) => t.thread_id);
  const entries = (await Promise.all(ids.map((id) => h.json<any[]>(['ledger', id])))).flat();
  const responses = entries.filter((e) => e.entry_type === 'response').map((e) => e.payload);
  expect(responses.some((p) => typeof p.body_text === 'string' && p.body_text.includes(`your key is ${echoed}`))).toBe(true);
  expect(responses.some((p) => p.request_id === `req-${echoed}`)).toBe(true);
  expect(responses.some((p) => p.rate_limit['x-ratelimit-echo'] === echoed)).toBe(true);
  const backlog = await h.json<{ epics: { stories: { description: string }[] }[] }>(['backlog', 'p']);
  expect(JSON.stringify(backlog)).toContain(`(key: ${echoed})`);
  expect((await h.json<{ ok: boolean }>(['ledger', 'verify'])).ok).toBe(true);

  const exported = join(h.home, 'export.jsonl');
  expect((await h.cli(['ledger', 'export', '--project', 'p', '--out', exported])).code).toBe(0);
  const requestIds = await h.query<{ id: string | null }>('SELECT provider_request_id AS id FROM llm_charges');
  expect(requestIds.some((r) => r.id === `req-${echoed}`)).toBe(true);

  for (const secret of [key, ...others]) expect(filesContaining(secret, [exported]), secret).toEqual([]);
  for (const secret of [key, ...others]) expect(await tablesContaining(secret), secret).toEqual([]);
  await h.stopDaemon(); // and after the WAL is checkpointed into the database file
  for (const secret of [key, ...others]) expect(filesContaining(secret, []), secret).toEqual([]);
}
