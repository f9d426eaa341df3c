-- Hand-written: an item's scope lock row released, then its thread's end and the lock of its orchestration for
-- the close check, in one round trip (db/thread-close.ts `endChildLockingParent` with a lock to release; it
-- was two statements, one round trip each, for every answer applied and every item failed). The statements
-- are the ones it replaces, in the same order (engine/tx.ts LOCK ORDER 3, then 4): the DELETE of the lock row
-- (its count returned as `released`: the caller refuses a lock no longer held, StaleStateError, and nothing
-- else is done here then), then `combine_end_thread_lock_parent`. The row goes before the orchestration is
-- locked: an expired row kept while waiting for the orchestration could be taken over by a recovery scan that
-- then waited for the same orchestration (test pg-shared-finishes pins it).
CREATE FUNCTION "combine_release_end_thread_lock_parent"(lock_scope text, lock_owner text, end_id text, from_status text, to_status text, closed_at_ bigint, parent_id text)
RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  released bigint;
BEGIN
  DELETE FROM "locks" WHERE "scope" = lock_scope AND "owner" = lock_owner;
  GET DIAGNOSTICS released = ROW_COUNT;
  IF released <> 1 THEN
    RETURN jsonb_build_object('released', released);
  END IF;
  RETURN combine_end_thread_lock_parent(end_id, from_status, to_status, closed_at_, parent_id) || jsonb_build_object('released', released);
END $$;
