-- Hand-written: the queue depth (llm_queue_depth, pg migration 0001) is kept by row triggers whose WHEN
-- conditions select the rows that move in or out of `queued`, instead of statement triggers with transition
-- tables. Those made Postgres copy every updated row of llm_work_items (old and new) into tuplestores on every
-- UPDATE of the table (claims, starts, lease renewals, finishes) and count them in plpgsql, three calls per
-- item (0.69 ms per item at 3 daemons, waits for a shared shard included). A WHEN that is false is evaluated
-- in the executor and queues nothing, so an update that leaves an item's queued-ness as it was (a start, a
-- finish, a lease renewal, a requeue of a queued item) costs no function call; an item pays one call when it
-- is queued and one when it leaves.
--
-- Exactness is unchanged: every row that enters or leaves `queued` (INSERT, UPDATE of any column list, DELETE)
-- adds its ±1 in its own transaction, so a rollback takes it back.
--
-- Shards: 64 rows, and each session takes one of its own (a session-level advisory lock on the slot, tried
-- in turn, kept until the session ends; remembered in the session setting combine.queue_depth_shard). With
-- pg_backend_pid() % 16, 30 daemon sessions shared shards: a claim waited for a generate-all's transaction
-- (it holds its shard row from its first child to its COMMIT) and the other way round, and two sessions'
-- transactions on one shard could deadlock through it (one holding the shard and waiting for an item the
-- other holds, the other queuing an item). Now no transaction waits for a shard row, so it takes no place in
-- the lock order (src/daemon/engine/tx.ts). Past 64 sessions the scan goes on past slot 63, and the function
-- creates the row of the slot it took on first use (the count sums every row): no two sessions ever share a
-- shard. The scan ends: only live sessions hold slots, a few each. A rolled-back transaction forgets the
-- setting (not the lock): the session tries the slots again and keeps the first it gets, its own included
-- (pg_try_advisory_lock succeeds again for its holder; a lower slot freed meanwhile is taken instead, and the
-- session holds both until it ends).
DROP TRIGGER "work_items_queue_depth_insert" ON "llm_work_items";
--> statement-breakpoint
DROP TRIGGER "work_items_queue_depth_update" ON "llm_work_items";
--> statement-breakpoint
DROP TRIGGER "work_items_queue_depth_delete" ON "llm_work_items";
--> statement-breakpoint
DROP FUNCTION "llm_work_items_queue_depth"();
--> statement-breakpoint
-- After the DROP TRIGGERs: their ACCESS EXCLUSIVE lock on llm_work_items has waited for every transaction of an
-- earlier build that could move an item, so none of them is blocked on a seed row here (an old trigger's
-- INSERT … ON CONFLICT on a shard this uncommitted INSERT created) while the DROP waits for it.
INSERT INTO "llm_queue_depth" ("id", "queued") SELECT g, 0 FROM generate_series(0, 63) AS g ON CONFLICT ("id") DO NOTHING;
--> statement-breakpoint
-- +1 for a row that is queued now (inserted queued, or moved into queued), -1 for one that left it (moved
-- out, or deleted): the triggers' WHEN conditions call it only for such rows. The advisory locks' keys are
-- (1668112996 = 0x636d6264, `cmbd` in ASCII; the slot): two int4 keys, a space apart from the single bigint
-- keys of the migrations' and the engine's advisory locks.
CREATE FUNCTION "llm_work_items_queue_depth_move"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  delta integer := CASE WHEN TG_OP <> 'DELETE' AND NEW."status" = 'queued' THEN 1 ELSE -1 END;
  shard integer := nullif(current_setting('combine.queue_depth_shard', true), '')::integer;
BEGIN
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
CREATE TRIGGER "work_items_queue_depth_insert" AFTER INSERT ON "llm_work_items"
FOR EACH ROW WHEN (NEW."status" = 'queued') EXECUTE FUNCTION "llm_work_items_queue_depth_move"();
--> statement-breakpoint
-- `IS DISTINCT FROM` on the two booleans: queued → queued and other → other (both false) call nothing.
CREATE TRIGGER "work_items_queue_depth_update" AFTER UPDATE ON "llm_work_items"
FOR EACH ROW WHEN ((OLD."status" = 'queued') IS DISTINCT FROM (NEW."status" = 'queued')) EXECUTE FUNCTION "llm_work_items_queue_depth_move"();
--> statement-breakpoint
CREATE TRIGGER "work_items_queue_depth_delete" AFTER DELETE ON "llm_work_items"
FOR EACH ROW WHEN (OLD."status" = 'queued') EXECUTE FUNCTION "llm_work_items_queue_depth_move"();
