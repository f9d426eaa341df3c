-- An EXPERIMENT for bench/diag-pg.ts (DIAG_SETUP_SQL=bench/ledger-append-no-head.sql), never a migration: the ledger
-- append without the chain head (seqs from a sequence, no lock, no link: the chain is broken), to measure what every
-- chain-head lever together could give at most (bench/README.md, 2026-11-25 23:27, issue-18-pgledger).
CREATE SEQUENCE IF NOT EXISTS exp_ledger_seq START 100000000;
CREATE OR REPLACE FUNCTION "llm_ledger_append"(
  thread_ids text[], work_item_ids text[], entry_types text[], attempts integer[], payloads text[], created_ats bigint[],
  meta_heads text[], meta_tails text[], content_digests text[]
) RETURNS TABLE ("entry_seq" bigint, "entry_prev_hash" text, "entry_hash" text) LANGUAGE plpgsql AS $$
DECLARE
  n integer := coalesce(cardinality(payloads), 0);
  seqs bigint[] := '{}'; prevs text[] := '{}'; hashes text[] := '{}';
  h text := repeat('0', 64);
BEGIN
  IF n = 0 THEN RETURN; END IF;
  FOR i IN 1..n LOOP
    IF encode(sha256(convert_to(payloads[i] || E'\n' || meta_heads[i] || E'\n' || meta_tails[i], 'UTF8')), 'hex')
       IS DISTINCT FROM content_digests[i] THEN
      RAISE EXCEPTION 'digest' USING ERRCODE = 'data_exception';
    END IF;
  END LOOP;
  FOR i IN 1..n LOOP
    seqs[i] := nextval('exp_ledger_seq');
    prevs[i] := h;
    h := encode(sha256(convert_to(h || E'\n' || payloads[i] || E'\n' || meta_heads[i] || seqs[i]::text || meta_tails[i], 'UTF8')), 'hex');
    hashes[i] := h;
  END LOOP;
  PERFORM set_config('combine.ledger_append', 'on', true);
  INSERT INTO "llm_ledger_entries" ("seq", "thread_id", "work_item_id", "entry_type", "attempt", "payload", "prev_hash", "hash", "created_at")
  SELECT * FROM unnest(seqs, thread_ids, work_item_ids, entry_types, attempts, payloads, prevs, hashes, created_ats);
  PERFORM set_config('combine.ledger_append', 'off', true);
  RETURN QUERY SELECT * FROM unnest(seqs, prevs, hashes);
END $$;
