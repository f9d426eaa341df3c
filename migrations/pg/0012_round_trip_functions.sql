-- Hand-written: the changed-row check of a guarded statement that runs in a transaction's COMMIT query
-- (db/statements.ts `runGuardedAtCommit`). There no client code runs between the statement and the
-- COMMIT, so the client cannot check the count and roll back: the statement checks it here, and a count
-- other than one raises, which fails the COMMIT query and rolls the whole transaction back. The SQLSTATE
-- is ours (class CB, not a standard one): db/errors.ts reads it as the client's StaleStateError (a stale
-- guard: the write runs again and decides on what the other transaction committed).
CREATE FUNCTION "combine_expect_one_change"(changed bigint, what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF changed IS DISTINCT FROM 1 THEN
    RAISE EXCEPTION '%', what USING ERRCODE = 'CB001';
  END IF;
END $$;
--> statement-breakpoint
-- Hand-written: an orchestration locked for closing and whether a child of it is still open or running,
-- in one round trip (db/threads.ts `lockThreadForClose`; it was two statements, one round trip each). The
-- order stays the one that makes two last children ending at once safe: the row is locked first, then
-- the children are looked at in a statement of their own, whose snapshot (VOLATILE: one per statement)
-- is taken after the lock was granted, so the second of the two sees the first's end committed. The row
-- comes back as JSON, every column under its name (a column added later comes with it), plus
-- `active_child`; NULL when there is no such thread.
CREATE FUNCTION "combine_lock_thread_for_close"(close_id text) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  locked jsonb;
BEGIN
  SELECT to_jsonb(t) INTO locked FROM "llm_threads" t WHERE t."id" = close_id FOR UPDATE;
  IF locked IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN locked || jsonb_build_object('active_child', EXISTS (
    SELECT 1 FROM "llm_threads" c WHERE c."parent_thread_id" = close_id AND c."status" IN ('open', 'running')));
END $$;
