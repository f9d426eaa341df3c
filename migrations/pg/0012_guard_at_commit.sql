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
