-- Hand-written: a child thread's end and the lock of its orchestration for the close check, in one round
-- trip (db/thread-close.ts `endChildLockingParent`; it was two statements, one round trip each, for every item
-- that ends). The statements are the two it replaces, in the same order (engine/tx.ts LOCK ORDER 4: the
-- child's row, then its orchestration's): the guarded UPDATE of the child (its changed-row count returned
-- as `changed`), then, only when it changed a row and the child has a parent, that parent's
-- `combine_lock_thread_for_close` — whose own statements, VOLATILE, each take a snapshot after the ones
-- before, so its look at the children sees this child's end, as the separate statements did.
CREATE FUNCTION "combine_end_thread_lock_parent"(end_id text, from_status text, to_status text, closed_at_ bigint, parent_id text)
RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  changed bigint;
BEGIN
  UPDATE "llm_threads" SET "status" = to_status, "closed_at" = closed_at_
  WHERE "id" = end_id AND "status" = from_status AND "parent_thread_id" IS NOT DISTINCT FROM parent_id;
  GET DIAGNOSTICS changed = ROW_COUNT;
  IF changed <> 1 OR parent_id IS NULL THEN
    RETURN jsonb_build_object('changed', changed);
  END IF;
  RETURN jsonb_build_object('changed', changed, 'parent', combine_lock_thread_for_close(parent_id));
END $$;
