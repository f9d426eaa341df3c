-- Hand-written: the queue depth (llm_queue_depth, pg migration 0001) is kept by row triggers whose WHEN
-- conditions select the rows that move in or out of `queued`, instead of statement triggers with transition
-- tables. Those made Postgres copy every updated row of llm_work_items (old and new) into tuplestores on every
-- UPDATE of the table (claims, starts, lease renewals, finishes) and count them in plpgsql: ~0.23 ms of server
-- CPU per statement, three per item. A WHEN that is false is evaluated in the executor and queues nothing, so
-- an update that leaves an item's queued-ness as it was (a start, a finish, a lease renewal, a requeue of a
-- queued item) costs no function call; an item pays one call when it is queued and one when it leaves.
--
-- Exactness is unchanged: every row that enters or leaves `queued` (INSERT, UPDATE of any column list, DELETE)
-- adds its ±1 in its own transaction, so a rollback takes it back. The delta still goes to the shard of the
-- transaction's backend (16 shards), so a transaction only ever locks its own shard row.
--
-- The shards are created here, so the functions only ever UPDATE one (a missing shard, after someone deleted
-- the rows, is created by the upsert fallback).
INSERT INTO "llm_queue_depth" ("id", "queued") SELECT g, 0 FROM generate_series(0, 15) AS g ON CONFLICT ("id") DO NOTHING;
--> statement-breakpoint
DROP TRIGGER "work_items_queue_depth_insert" ON "llm_work_items";
--> statement-breakpoint
DROP TRIGGER "work_items_queue_depth_update" ON "llm_work_items";
--> statement-breakpoint
DROP TRIGGER "work_items_queue_depth_delete" ON "llm_work_items";
--> statement-breakpoint
DROP FUNCTION "llm_work_items_queue_depth"();
--> statement-breakpoint
-- +1 for a row that is queued now (inserted queued, or moved into queued), -1 for one that left it (moved
-- out, or deleted): the triggers' WHEN conditions call it only for such rows.
CREATE FUNCTION "llm_work_items_queue_depth_move"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  delta integer := CASE WHEN TG_OP <> 'DELETE' AND NEW."status" = 'queued' THEN 1 ELSE -1 END;
  shard integer := pg_backend_pid() % 16;
BEGIN
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
