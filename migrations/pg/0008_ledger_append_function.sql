-- Hand-written: appends a run of ledger entries at the chain head in ONE statement (lock the head, link
-- the entries, insert them), so an appending transaction holds the head for one round trip and its COMMIT
-- instead of two round trips and the COMMIT (pg-scale-diag: the head is the wall of several daemons).
--
-- The client sends each entry's fields, its canonical payload, and its canonical metadata split around
-- `seq` (the one field that depends on the head): hash = sha256(prev_hash ‖ "\n" ‖ payload ‖ "\n" ‖
-- meta_head ‖ seq ‖ meta_tail), the same bytes src/ledger/chain.ts hashes. The link triggers (0005) check
-- the run against the head again and move it; a hash computed wrongly here would fail `ledger verify`,
-- which recomputes every hash in JavaScript.
CREATE FUNCTION "llm_ledger_append"(
  thread_ids text[],
  work_item_ids text[],
  entry_types text[],
  attempts integer[],
  payloads text[],
  created_ats bigint[],
  meta_heads text[],
  meta_tails text[]
) RETURNS TABLE ("entry_seq" bigint, "entry_prev_hash" text, "entry_hash" text) LANGUAGE plpgsql AS $$
DECLARE
  head_seq bigint;
  head_hash text;
  n integer := cardinality(payloads);
  seqs bigint[] := '{}';
  prevs text[] := '{}';
  hashes text[] := '{}';
BEGIN
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
