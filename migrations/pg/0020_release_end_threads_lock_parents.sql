-- Hand-written: the ends of a shared closure of answers' children in one round trip (db/thread-close.ts
-- `endChildrenLockingParents`; each child's end was a round trip of its own, `combine_release_end_thread_lock_parent`,
-- while the closure held its documents' heads). The statements are the ones it replaces, in the order of
-- engine/tx.ts LOCK ORDER 3, then 4 for several children: for each child, in the order given (id order), its
-- scope lock row released (DELETE, guarded: a row not held any more stops here, `lost` names its owner and
-- nothing else is done) and the child's guarded UPDATE (its count in `changed`, one per child, in order);
-- then, only when every child moved, each orchestration given (id order) locked for its close check by
-- `combine_lock_thread_for_close`, after every child's end, so its look at the children sees all of them.
-- `ends`: [{scope, owner, id, from, to, closed_at, parent}], `scope` null for no lock row, `id` null for a
-- release alone (a thread already ended). `parents`: the orchestrations' ids.
CREATE FUNCTION "combine_release_end_threads_lock_parents"(ends jsonb, parents jsonb)
RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  e jsonb;
  n bigint;
  p text;
  changed jsonb := '[]'::jsonb;
  locked jsonb := '{}'::jsonb;
BEGIN
  FOR e IN SELECT x.e FROM jsonb_array_elements(ends) WITH ORDINALITY AS x(e, i) ORDER BY x.i LOOP
    IF e->>'scope' IS NOT NULL THEN
      DELETE FROM "locks" WHERE "scope" = e->>'scope' AND "owner" = e->>'owner';
      GET DIAGNOSTICS n = ROW_COUNT;
      IF n <> 1 THEN
        RETURN jsonb_build_object('lost', e->>'owner');
      END IF;
    END IF;
    IF e->>'id' IS NOT NULL THEN
      UPDATE "llm_threads" SET "status" = e->>'to', "closed_at" = CAST(e->>'closed_at' AS bigint)
      WHERE "id" = e->>'id' AND "status" = e->>'from' AND "parent_thread_id" IS NOT DISTINCT FROM e->>'parent';
      GET DIAGNOSTICS n = ROW_COUNT;
      changed := changed || to_jsonb(n);
    END IF;
  END LOOP;
  IF EXISTS (SELECT 1 FROM jsonb_array_elements(changed) AS c(n) WHERE c.n <> to_jsonb(1)) THEN
    RETURN jsonb_build_object('changed', changed);
  END IF;
  FOR p IN SELECT x.p FROM jsonb_array_elements_text(parents) WITH ORDINALITY AS x(p, i) ORDER BY x.i LOOP
    locked := locked || jsonb_build_object(p, combine_lock_thread_for_close(p));
  END LOOP;
  RETURN jsonb_build_object('changed', changed, 'parents', locked);
END $$;
