-- Hand-written: the database's own guarantees, as the SQLite migrations 0001, 0005 and 0009 give them,
-- in plpgsql. Error messages are the SQLite ones, so both backends explain a refusal the same way.
--
-- 1. The ledger is append-only: UPDATE refused; DELETE only of entries a checkpoint covers (`combine
--    prune`); TRUNCATE refused (it would bypass row triggers). Checkpoints are append-only and must
--    describe entries that exist.
-- 2. The chain is one line however many daemons append: an entry must link to llm_ledger_head (seq + 1,
--    prev_hash = head hash), which the same trigger then moves. The head row is locked until the
--    appending transaction ends, so concurrent appenders queue on it and can neither fork nor skip.
-- 3. llm_queue_depth: the number of queued work items, as the sum of shard rows kept exact by statement
--    triggers in the transaction that changes the items.
INSERT INTO "llm_ledger_head" ("id", "seq", "hash") VALUES (1, 0, repeat('0', 64));
--> statement-breakpoint
CREATE FUNCTION "llm_ledger_entries_link"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  head_seq bigint;
  head_hash text;
BEGIN
  SELECT "seq", "hash" INTO head_seq, head_hash FROM "llm_ledger_head" WHERE "id" = 1 FOR UPDATE;
  IF NEW."seq" IS DISTINCT FROM head_seq + 1 OR NEW."prev_hash" IS DISTINCT FROM head_hash THEN
    RAISE EXCEPTION 'llm_ledger_entries: entry % does not link to the chain head (seq %)', NEW."seq", head_seq;
  END IF;
  UPDATE "llm_ledger_head" SET "seq" = NEW."seq", "hash" = NEW."hash" WHERE "id" = 1;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER "ledger_entries_link" BEFORE INSERT ON "llm_ledger_entries"
FOR EACH ROW EXECUTE FUNCTION "llm_ledger_entries_link"();
--> statement-breakpoint
-- The head moves only through the link trigger (trigger depth 2), never by a statement of its own.
CREATE FUNCTION "llm_ledger_head_guard"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'UPDATE' OR pg_trigger_depth() < 2 THEN
    RAISE EXCEPTION 'llm_ledger_head moves only when an entry is appended: % refused', TG_OP;
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER "ledger_head_guard" BEFORE UPDATE OR DELETE ON "llm_ledger_head"
FOR EACH ROW EXECUTE FUNCTION "llm_ledger_head_guard"();
--> statement-breakpoint
CREATE TRIGGER "ledger_head_no_truncate" BEFORE TRUNCATE ON "llm_ledger_head"
FOR EACH STATEMENT EXECUTE FUNCTION "llm_ledger_head_guard"();
--> statement-breakpoint
CREATE FUNCTION "llm_ledger_entries_append_only"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    -- Runs never overlap: the only run that can cover OLD.seq is the last one starting at or before it.
    IF EXISTS (
      SELECT 1 FROM (
        SELECT "to_seq" FROM "llm_ledger_checkpoints" WHERE "from_seq" <= OLD."seq" ORDER BY "from_seq" DESC LIMIT 1
      ) c WHERE c."to_seq" >= OLD."seq"
    ) THEN
      RETURN OLD;
    END IF;
    RAISE EXCEPTION 'llm_ledger_entries is append-only: DELETE refused (only combine prune removes entries, under a checkpoint)';
  END IF;
  RAISE EXCEPTION 'llm_ledger_entries is append-only: % refused', TG_OP;
END $$;
--> statement-breakpoint
CREATE TRIGGER "ledger_entries_no_update" BEFORE UPDATE ON "llm_ledger_entries"
FOR EACH ROW EXECUTE FUNCTION "llm_ledger_entries_append_only"();
--> statement-breakpoint
CREATE TRIGGER "ledger_entries_delete_only_checkpointed" BEFORE DELETE ON "llm_ledger_entries"
FOR EACH ROW EXECUTE FUNCTION "llm_ledger_entries_append_only"();
--> statement-breakpoint
CREATE TRIGGER "ledger_entries_no_truncate" BEFORE TRUNCATE ON "llm_ledger_entries"
FOR EACH STATEMENT EXECUTE FUNCTION "llm_ledger_entries_append_only"();
--> statement-breakpoint
CREATE FUNCTION "llm_ledger_checkpoints_guard"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW."to_seq" < NEW."from_seq"
      OR NOT EXISTS (SELECT 1 FROM "llm_ledger_entries" WHERE "seq" = NEW."from_seq" AND "prev_hash" = NEW."hash_before")
      OR NOT EXISTS (SELECT 1 FROM "llm_ledger_entries" WHERE "seq" = NEW."to_seq" AND "hash" = NEW."hash_after")
      OR (SELECT count(*) FROM "llm_ledger_entries" WHERE "seq" BETWEEN NEW."from_seq" AND NEW."to_seq") <> NEW."to_seq" - NEW."from_seq" + 1
    THEN
      RAISE EXCEPTION 'a ledger checkpoint must describe a run of entries that exist, with their hashes';
    END IF;
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'llm_ledger_checkpoints is append-only: % refused', TG_OP;
END $$;
--> statement-breakpoint
CREATE TRIGGER "ledger_checkpoints_match_entries" BEFORE INSERT ON "llm_ledger_checkpoints"
FOR EACH ROW EXECUTE FUNCTION "llm_ledger_checkpoints_guard"();
--> statement-breakpoint
CREATE TRIGGER "ledger_checkpoints_no_update" BEFORE UPDATE OR DELETE ON "llm_ledger_checkpoints"
FOR EACH ROW EXECUTE FUNCTION "llm_ledger_checkpoints_guard"();
--> statement-breakpoint
CREATE TRIGGER "ledger_checkpoints_no_truncate" BEFORE TRUNCATE ON "llm_ledger_checkpoints"
FOR EACH STATEMENT EXECUTE FUNCTION "llm_ledger_checkpoints_guard"();
--> statement-breakpoint
-- Queue depth. One statement trigger per event (not one per row): a claim of many items, or a
-- heartbeat, adds one delta. The delta goes to the shard of the transaction's backend (16 shards):
-- a transaction only ever locks its own shard row, so two daemons' transactions neither deadlock on
-- the counter nor all wait on one row. A shard may go negative (enqueued by one backend, claimed by
-- another); the sum is exact.
CREATE FUNCTION "llm_work_items_queue_depth"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  delta integer;
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT count(*) INTO delta FROM new_rows WHERE "status" = 'queued';
  ELSIF TG_OP = 'UPDATE' THEN
    SELECT (SELECT count(*) FROM new_rows WHERE "status" = 'queued') - (SELECT count(*) FROM old_rows WHERE "status" = 'queued')
      INTO delta;
  ELSE
    SELECT -count(*) INTO delta FROM old_rows WHERE "status" = 'queued';
  END IF;
  IF delta <> 0 THEN
    INSERT INTO "llm_queue_depth" ("id", "queued") VALUES (pg_backend_pid() % 16, delta)
    ON CONFLICT ("id") DO UPDATE SET "queued" = "llm_queue_depth"."queued" + EXCLUDED."queued";
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER "work_items_queue_depth_insert" AFTER INSERT ON "llm_work_items"
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "llm_work_items_queue_depth"();
--> statement-breakpoint
CREATE TRIGGER "work_items_queue_depth_update" AFTER UPDATE ON "llm_work_items"
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "llm_work_items_queue_depth"();
--> statement-breakpoint
CREATE TRIGGER "work_items_queue_depth_delete" AFTER DELETE ON "llm_work_items"
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION "llm_work_items_queue_depth"();
