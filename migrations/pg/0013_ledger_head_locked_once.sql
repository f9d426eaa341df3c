-- Hand-written: an append through llm_ledger_append (0009) locks the chain head once and moves it itself;
-- the triggers that guard the entries no longer redo, for its rows, what it already guarantees (issue 18
-- target 9: three appends per item were ~20 % of the server's CPU). Before, each call locked the head,
-- then its INSERT ran the per-row link trigger (a plpgsql call and a read of the head per entry), the
-- statement trigger (a plpgsql call with a transition table: the head locked again, two reads of the
-- entries, the head's UPDATE) and, for that UPDATE, the head's guard (another plpgsql call).
--
-- What the function guarantees: it links the entries from the head it holds locked (seq + 1, prev_hash =
-- the head's hash, each next entry the one before), computes every hash itself from the bytes it checked
-- (0009), and moves the head to the last entry in the same transaction. The lock is held until the
-- transaction ends, so appends stay serialized through the head and can neither fork nor skip.
--
-- What stays, and why:
-- 1. Every guard still runs, unchanged, for an INSERT that does not come from the function (SQLite's path
--    has its own triggers; here: an import, a hand-written statement, a future code path): the per-row
--    link trigger (0005) refuses at once an entry at or behind the head, the statement trigger (0005)
--    locks the head, refuses a run that does not link to it and moves it. The function marks its own
--    INSERT and move of the head with the transaction-local setting `combine.ledger_append`, which it
--    clears before it returns, so a later INSERT in the same transaction is checked again; the triggers'
--    WHEN conditions, which the executor evaluates without calling plpgsql, skip them for the marked
--    statements only. The setting is not a security boundary: a session that could set it could as well
--    disable the triggers (the daemon's role owns the tables); it tells the triggers that the function
--    linked these rows under the lock, so that our own code paths are guarded as before.
-- 2. The head's guard (0001) refuses any move of the head but an append's: its UPDATE case is now the
--    trigger's WHEN. The statement trigger's move is at trigger depth 1 (WHEN runs before the guard's
--    function would, so at one less than the function saw: 0001 tested `< 2`), the function's is marked
--    by the setting. DELETE and TRUNCATE of the head stay refused, always.
-- 3. The foreign keys of an entry to its thread and work item stay: the function does not check that
--    they exist, and they keep `combine prune` (db/retention.ts) from deleting a thread or work item
--    whose entries are still stored.
DROP TRIGGER "ledger_entries_link" ON "llm_ledger_entries";
--> statement-breakpoint
CREATE TRIGGER "ledger_entries_link" BEFORE INSERT ON "llm_ledger_entries"
FOR EACH ROW WHEN (current_setting('combine.ledger_append', true) IS DISTINCT FROM 'on')
EXECUTE FUNCTION "llm_ledger_entries_link"();
--> statement-breakpoint
DROP TRIGGER "ledger_entries_move_head" ON "llm_ledger_entries";
--> statement-breakpoint
CREATE TRIGGER "ledger_entries_move_head" AFTER INSERT ON "llm_ledger_entries"
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
WHEN (current_setting('combine.ledger_append', true) IS DISTINCT FROM 'on')
EXECUTE FUNCTION "llm_ledger_entries_move_head"();
--> statement-breakpoint
DROP TRIGGER "ledger_head_guard" ON "llm_ledger_head";
--> statement-breakpoint
CREATE TRIGGER "ledger_head_guard" BEFORE UPDATE ON "llm_ledger_head"
FOR EACH ROW WHEN (pg_trigger_depth() < 1 AND current_setting('combine.ledger_append', true) IS DISTINCT FROM 'on')
EXECUTE FUNCTION "llm_ledger_head_guard"();
--> statement-breakpoint
CREATE TRIGGER "ledger_head_no_delete" BEFORE DELETE ON "llm_ledger_head"
FOR EACH ROW EXECUTE FUNCTION "llm_ledger_head_guard"();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION "llm_ledger_append"(
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
  n integer := coalesce(cardinality(payloads), 0);
  seqs bigint[] := '{}';
  prevs text[] := '{}';
  hashes text[] := '{}';
BEGIN
  IF n = 0 THEN
    RETURN;
  END IF;
  FOR i IN 1..n LOOP
    IF encode(sha256(convert_to(payloads[i] || E'\n' || meta_heads[i] || E'\n' || meta_tails[i], 'UTF8')), 'hex')
       IS DISTINCT FROM content_digests[i] THEN
      RAISE EXCEPTION 'ledger entry % of %: the database would hash other bytes than the client did', i, n
        USING ERRCODE = 'data_exception';
    END IF;
  END LOOP;
  -- Checked before the head is locked: the lock is held for the linking, the insert and the move only.
  SELECT h."seq", h."hash" INTO head_seq, head_hash FROM "llm_ledger_head" h WHERE h."id" = 1 FOR UPDATE;
  FOR i IN 1..n LOOP
    seqs[i] := head_seq + i;
    prevs[i] := head_hash;
    head_hash := encode(sha256(convert_to(
      head_hash || E'\n' || payloads[i] || E'\n' || meta_heads[i] || (head_seq + i)::text || meta_tails[i], 'UTF8')), 'hex');
    hashes[i] := head_hash;
  END LOOP;
  -- Linked here under the lock: the guards skip these two statements (see above), and only these.
  PERFORM set_config('combine.ledger_append', 'on', true);
  INSERT INTO "llm_ledger_entries" ("seq", "thread_id", "work_item_id", "entry_type", "attempt", "payload", "prev_hash", "hash", "created_at")
  SELECT * FROM unnest(seqs, thread_ids, work_item_ids, entry_types, attempts, payloads, prevs, hashes, created_ats);
  UPDATE "llm_ledger_head" SET "seq" = seqs[n], "hash" = head_hash WHERE "id" = 1;
  PERFORM set_config('combine.ledger_append', 'off', true);
  RETURN QUERY SELECT * FROM unnest(seqs, prevs, hashes);
END $$;
