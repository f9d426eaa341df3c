-- Hand-written: the ends of a shared closure of answers' children in one round trip (db/thread-close.ts
-- `endChildrenLockingParents`; each child's end was a round trip of its own, `combine_release_end_thread_lock_parent`,
-- while the closure held its documents' heads). The statements are the ones it replaces, taken in the order of
-- engine/tx.ts LOCK ORDER, literally: first every child's scope lock row released (3; DELETE, guarded: a row not
-- held any more stops here, `lost` names its owner, and no thread is touched), then every child's guarded UPDATE
-- in the order given (id order: 4; a row whose status or parent changed stops here, `stale` names it, and no
-- orchestration is locked), then each orchestration given (id order) locked for its close check by
-- `combine_lock_thread_for_close`, after every child's end, so its look at the children sees all of them.
-- Stopping at the first failed guard: the caller rolls the whole closure back, so nothing after it would count.
-- `ends`: [{scope, owner, id, from, to, closed_at, parent}], `scope` null for no lock row, `id` null for a
-- release alone (a thread already ended). `parents`: the orchestrations' ids.
CREATE FUNCTION "combine_release_end_threads_lock_parents"(ends jsonb, parents jsonb)
RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  e jsonb;
  n bigint;
  p text;
  locked jsonb := '{}'::jsonb;
BEGIN
  FOR e IN SELECT x.e FROM jsonb_array_elements(ends) WITH ORDINALITY AS x(e, i) ORDER BY x.i LOOP
    CONTINUE WHEN e->>'scope' IS NULL;
    DELETE FROM "locks" WHERE "scope" = e->>'scope' AND "owner" = e->>'owner';
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> 1 THEN
      RETURN jsonb_build_object('lost', e->>'owner');
    END IF;
  END LOOP;
  FOR e IN SELECT x.e FROM jsonb_array_elements(ends) WITH ORDINALITY AS x(e, i) ORDER BY x.i LOOP
    CONTINUE WHEN e->>'id' IS NULL;
    UPDATE "llm_threads" SET "status" = e->>'to', "closed_at" = CAST(e->>'closed_at' AS bigint)
    WHERE "id" = e->>'id' AND "status" = e->>'from' AND "parent_thread_id" IS NOT DISTINCT FROM e->>'parent';
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> 1 THEN
      RETURN jsonb_build_object('stale', e->>'id');
    END IF;
  END LOOP;
  FOR p IN SELECT x.p FROM jsonb_array_elements_text(parents) WITH ORDINALITY AS x(p, i) ORDER BY x.i LOOP
    locked := locked || jsonb_build_object(p, combine_lock_thread_for_close(p));
  END LOOP;
  RETURN jsonb_build_object('parents', locked);
END $$;
