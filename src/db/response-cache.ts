/** llm_response_cache: request hash → the ledger entries of the newest valid answer to that request. */
import type { Db } from './connection.js';
import type { ResponseCacheRow } from './schema.js';
import { prepared } from './statements.js';

export function getCachedAnswer(db: Db, requestHash: string): ResponseCacheRow | undefined {
  return prepared(db, 'SELECT * FROM llm_response_cache WHERE request_hash = ?').get(requestHash) as ResponseCacheRow | undefined;
}

/** Points the request hash at this answer; a newer valid answer replaces an older one. */
export function rememberCachedAnswer(db: Db, row: ResponseCacheRow): void {
  prepared(
    db,
    `INSERT INTO llm_response_cache (request_hash, prompt_seq, response_seq, created_at)
     VALUES (@request_hash, @prompt_seq, @response_seq, @created_at)
     ON CONFLICT (request_hash) DO UPDATE SET prompt_seq = excluded.prompt_seq,
       response_seq = excluded.response_seq, created_at = excluded.created_at`,
  ).run(row);
}
