-- Hand-written: an INSERT of queued work items adds to the queue depth (0017) once per statement, not once per row.
-- generate-all inserts an orchestration's children in one statement (480 in bench target 9): the row trigger called
-- plpgsql 480 times, and each call updated the session's one shard row again, in the same transaction. None of
-- those versions can be pruned before the COMMIT, so each UPDATE found the row at the end of a HOT chain grown by
-- every one before it: the statement's work grew with the square of its rows. Now a statement trigger counts the
-- statement's queued rows in its transition table and adds them in one UPDATE.
--
-- Only INSERT changes. An UPDATE's transition tables copy every updated row of llm_work_items, old and new, on
-- every UPDATE of the table (why 0017 left statement triggers); an INSERT's copies only the rows it inserts, which
-- the row trigger handled one call each. UPDATE and DELETE keep their row triggers and WHEN conditions.
--
-- Exactness is unchanged: the statement trigger runs in the inserting statement's transaction, after its rows, and
-- adds exactly the count of the rows it inserted queued (a rollback takes it back with them); an INSERT with no
-- queued row changes nothing. The shard is the session's own, taken as before. (Every INSERT now calls the function
-- once and copies its rows into the transition table, even with no queued row, where the row trigger's WHEN skipped
-- such rows for free: one call per statement, negligible beside the row calls it replaces.)
CREATE OR REPLACE FUNCTION "llm_work_items_queue_depth_move"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  delta integer;
  shard integer := nullif(current_setting('combine.queue_depth_shard', true), '')::integer;
BEGIN
  IF TG_LEVEL = 'STATEMENT' THEN
    -- The INSERT trigger below: its transition table. Planned on first use only, so the row triggers never see it.
    SELECT count(*) INTO delta FROM new_rows WHERE "status" = 'queued';
    IF delta = 0 THEN
      RETURN NULL;
    END IF;
  ELSE
    delta := CASE WHEN TG_OP <> 'DELETE' AND NEW."status" = 'queued' THEN 1 ELSE -1 END;
  END IF;
  IF shard IS NULL THEN
    shard := 0;
    WHILE NOT pg_try_advisory_lock(1668112996, shard) LOOP
      shard := shard + 1;
    END LOOP;
    PERFORM set_config('combine.queue_depth_shard', shard::text, false);
  END IF;
  UPDATE "llm_queue_depth" SET "queued" = "queued" + delta WHERE "id" = shard;
  IF NOT FOUND THEN
    INSERT INTO "llm_queue_depth" ("id", "queued") VALUES (shard, delta)
    ON CONFLICT ("id") DO UPDATE SET "queued" = "llm_queue_depth"."queued" + EXCLUDED."queued";
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
DROP TRIGGER "work_items_queue_depth_insert" ON "llm_work_items";
--> statement-breakpoint
CREATE TRIGGER "work_items_queue_depth_insert" AFTER INSERT ON "llm_work_items"
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "llm_work_items_queue_depth_move"();
