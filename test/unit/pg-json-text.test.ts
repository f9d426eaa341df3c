/**
 * `jsonText` on Postgres (src/db/dialect.ts) reads JSON text holding the escape of U+0000, which `jsonb`
 * refuses (22P05): a provider's body kept as received may hold one (domain/storable-text.ts). The NUL reads as
 * U+FFFD; every other value, a literal `\u0000` behind an escaped backslash included, reads as it is. So does the
 * escape of half a surrogate pair, which `jsonb` refuses too (22P02).
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonNumber, jsonText } from '../../src/db/dialect.js';
import { createTestDatabase, openTestPool, type TestDatabase } from '../helpers/postgres.js';

let db: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase({ migrated: false });
  pool = openTestPool(db.url, 1);
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

async function read(sqlOf: (column: string) => string, value: unknown): Promise<unknown> {
  const { rows } = await pool.query(`SELECT ${sqlOf('t.doc')} AS v FROM (SELECT $1::text AS doc) t`, [JSON.stringify(value)]);
  return rows[0].v;
}

describe('jsonText on Postgres over JSON text holding \\u0000', () => {
  it('reads the other fields of a body whose fingerprint holds a NUL (the scheduled run usage sum)', async () => {
    const body = { system_fingerprint: 'fp\u0000x', usage: { prompt_tokens: 3, total_tokens: 5 } };
    await expect(pool.query(`SELECT ($1::text::jsonb #>> '{usage,total_tokens}') AS v`, [JSON.stringify(body)])).rejects.toMatchObject({ code: '22P05' });
    expect(await read((c) => jsonText('postgres', c, 'usage.total_tokens'), body)).toBe('5');
    expect(Number(await read((c) => jsonNumber('postgres', c, 'usage.prompt_tokens'), body))).toBe(3);
    expect(await read((c) => jsonText('postgres', c, 'system_fingerprint'), body)).toBe('fp\ufffdx');
  });

  it('reads every other string as JSON.parse does: escaped backslashes, a literal \\u0000, other escapes', async () => {
    const strings = ['\\u0000', '\\\u0000', '\\\\u0000', 'a\\', '"\\"', '\\u005c', 'tab\there', 'é\u0001', ''];
    for (const s of strings) {
      expect(await read((c) => jsonText('postgres', c, 'a.b'), { a: { b: s } }), JSON.stringify(s)).toBe(s.replaceAll('\u0000', '\ufffd'));
    }
  });
});

describe('jsonText on Postgres over JSON text holding half a surrogate pair', () => {
  it("reads the other fields of a body whose fingerprint holds a lone surrogate's escape (the scheduled run usage sum)", async () => {
    for (const fingerprint of ['fp\ud83d', 'fp\udc00x', 'fp\ude00\ud83d']) {
      const body = { system_fingerprint: fingerprint, usage: { prompt_tokens: 3, total_tokens: 5 } };
      await expect(pool.query(`SELECT ($1::text::jsonb #>> '{usage,total_tokens}') AS v`, [JSON.stringify(body)])).rejects.toMatchObject({ code: '22P02' });
      expect(await read((c) => jsonText('postgres', c, 'usage.total_tokens'), body)).toBe('5');
      expect(Number(await read((c) => jsonNumber('postgres', c, 'usage.prompt_tokens'), body))).toBe(3);
      expect(await read((c) => jsonText('postgres', c, 'system_fingerprint'), body)).toBe(fingerprint.toWellFormed());
    }
  });

  it('reads whole pairs, written raw or escaped, and the text of an escape behind an escaped backslash, as they are', async () => {
    const strings = ['\ud83d\ude00', 'a \ud83d\ude00 b \ud83d\ude01', '\\ud800', '\\udc00', '\\\ud83d\ude00'];
    for (const s of strings) expect(await read((c) => jsonText('postgres', c, 'a'), { a: s }), JSON.stringify(s)).toBe(s);
    // Escaped by hand (JSON.stringify writes a whole pair raw): upper-case hex, a pair split by nothing else.
    const { rows } = await pool.query(`SELECT ${jsonText('postgres', 't.doc', 'a')} AS v FROM (SELECT $1::text AS doc) t`, ['{"a":"x\\uD83D\\uDE00y\\uDBFF"}']);
    expect(rows[0].v).toBe('x\ud83d\ude00y\ufffd');
  });
});
