-- Hand-written: llm_ledger_append (0008) with a check of the bytes it hashes, so that the append can ride
-- on the query that COMMITs its transaction (db/pg/writer.ts): the head is then held for the server's
-- statements and the fsync only, and no client code runs between the append and the COMMIT — so a wrong
-- hash has to be refused here, before the COMMIT, not by a check in the client after it.
--
-- The client sends, with each entry, content_digests[i] = sha256(payload ‖ "\n" ‖ meta_head ‖ "\n" ‖
-- meta_tail) of its own bytes (src/ledger/store.ts). The function computes the same digest over the text
-- it received, converted to UTF-8 as the hash is: equal digests mean the database hashes exactly the bytes
-- src/ledger/chain.ts hashes (the rest of the hashed text, prev_hash and seq, is ASCII the database makes).
-- A mismatch (an encoding surprise) raises, and the transaction rolls back with nothing appended.
DROP FUNCTION "llm_ledger_append"(text[], text[], text[], integer[], text[], bigint[], text[], text[]);
--> statement-breakpoint
CREATE FUNCTION "llm_ledger_append"(
  thread_ids text[],
  work_item_ids text[],
  entry_types text[],
  attempts integer[],
  payloads text[],
  created_ats bigint[],
  meta_heads text[],
  meta_tails text[],
  content_digests text[]
) RETURNS TABLE ("entry_seq" bigint, "entry_prev_hash" text, "entry_hash" text) LANGUAGE plpgsql AS $$
DECLARE
  head_seq bigint;
  head_hash text;
  n integer := cardinality(payloads);
  seqs bigint[] := '{}';
  prevs text[] := '{}';
  hashes text[] := '{}';
BEGIN
  FOR i IN 1..n LOOP
    IF encode(sha256(convert_to(payloads[i] || E'\n' || meta_heads[i] || E'\n' || meta_tails[i], 'UTF8')), 'hex')
       IS DISTINCT FROM content_digests[i] THEN
      RAISE EXCEPTION 'ledger entry % of %: the database would hash other bytes than the client did', i, n
        USING ERRCODE = 'data_exception';
    END IF;
  END LOOP;
  -- Checked before the head is locked: the lock is held for the linking and the insert only.
  SELECT h."seq", h."hash" INTO head_seq, head_hash FROM "llm_ledger_head" h WHERE h."id" = 1 FOR UPDATE;
  FOR i IN 1..n LOOP
    seqs[i] := head_seq + i;
    prevs[i] := head_hash;
    head_hash := encode(sha256(convert_to(
      head_hash || E'\n' || payloads[i] || E'\n' || meta_heads[i] || (head_seq + i)::text || meta_tails[i], 'UTF8')), 'hex');
    hashes[i] := head_hash;
  END LOOP;
  INSERT INTO "llm_ledger_entries" ("seq", "thread_id", "work_item_id", "entry_type", "attempt", "payload", "prev_hash", "hash", "created_at")
  SELECT * FROM unnest(seqs, thread_ids, work_item_ids, entry_types, attempts, payloads, prevs, hashes, created_ats);
  RETURN QUERY SELECT * FROM unnest(seqs, prevs, hashes);
END $$;
