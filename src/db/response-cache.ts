/** llm_response_cache: request hash → the ledger entries of the newest valid answer to that request. */
import type { Sql } from '../core/sql.js';
import type { ResponseCacheRow } from './schema.js';

export async function getCachedAnswer(sql: Sql, requestHash: string): Promise<ResponseCacheRow | undefined> {
  return (await sql.get('SELECT * FROM llm_response_cache WHERE request_hash = ?', [requestHash])) as ResponseCacheRow | undefined;
}

/** Points the request hash at this answer; a newer valid answer replaces an older one. */
export async function rememberCachedAnswer(sql: Sql, row: ResponseCacheRow): Promise<void> {
  await sql.run(
    `INSERT INTO llm_response_cache (request_hash, prompt_seq, response_seq, created_at)
     VALUES (@request_hash, @prompt_seq, @response_seq, @created_at)
     ON CONFLICT (request_hash) DO UPDATE SET prompt_seq = excluded.prompt_seq,
       response_seq = excluded.response_seq, created_at = excluded.created_at`,
    row,
  );
}
