-- Hand-written: every status column accepts only the states of its machine (the transition tables in
-- domain/states.ts and domain/schedule.ts), enforced by the database itself as River's CHECK constraints
-- do. SQLite cannot add a CHECK constraint to an existing table without rebuilding it (and re-creating
-- its indexes and triggers, with every column spelled out), so each constraint is a pair of BEFORE
-- triggers — on INSERT, and on UPDATE OF status — that abort the statement, like a failed CHECK.
-- A row already outside its machine stops the migration (the last statement of each table rewrites such
-- rows' status to itself, which fires the new trigger), rather than being kept in a table that refuses it.
-- llm_threads.status: domain/states.ts THREAD_STATUSES.
CREATE TRIGGER `threads_status_check_insert` BEFORE INSERT ON `llm_threads`
WHEN NEW.`status` NOT IN ('open', 'running', 'complete', 'failed', 'canceled')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_threads.status');
END;
--> statement-breakpoint
CREATE TRIGGER `threads_status_check_update` BEFORE UPDATE OF `status` ON `llm_threads`
WHEN NEW.`status` NOT IN ('open', 'running', 'complete', 'failed', 'canceled')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_threads.status');
END;
--> statement-breakpoint
UPDATE `llm_threads` SET `status` = `status` WHERE `status` NOT IN ('open', 'running', 'complete', 'failed', 'canceled');
--> statement-breakpoint
-- llm_work_items.status: domain/states.ts WORK_ITEM_STATUSES.
CREATE TRIGGER `work_items_status_check_insert` BEFORE INSERT ON `llm_work_items`
WHEN NEW.`status` NOT IN ('queued', 'claimed', 'running', 'applied', 'failed', 'dead_letter')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_work_items.status');
END;
--> statement-breakpoint
CREATE TRIGGER `work_items_status_check_update` BEFORE UPDATE OF `status` ON `llm_work_items`
WHEN NEW.`status` NOT IN ('queued', 'claimed', 'running', 'applied', 'failed', 'dead_letter')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_work_items.status');
END;
--> statement-breakpoint
UPDATE `llm_work_items` SET `status` = `status` WHERE `status` NOT IN ('queued', 'claimed', 'running', 'applied', 'failed', 'dead_letter');
--> statement-breakpoint
-- llm_charges.status: domain/states.ts CHARGE_STATUSES.
CREATE TRIGGER `charges_status_check_insert` BEFORE INSERT ON `llm_charges`
WHEN NEW.`status` NOT IN ('reserved', 'settled', 'in_doubt', 'released')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_charges.status');
END;
--> statement-breakpoint
CREATE TRIGGER `charges_status_check_update` BEFORE UPDATE OF `status` ON `llm_charges`
WHEN NEW.`status` NOT IN ('reserved', 'settled', 'in_doubt', 'released')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_charges.status');
END;
--> statement-breakpoint
UPDATE `llm_charges` SET `status` = `status` WHERE `status` NOT IN ('reserved', 'settled', 'in_doubt', 'released');
--> statement-breakpoint
-- schedules.status: domain/schedule.ts SCHEDULE_STATUSES.
CREATE TRIGGER `schedules_status_check_insert` BEFORE INSERT ON `schedules`
WHEN NEW.`status` NOT IN ('active', 'paused', 'removed')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: schedules.status');
END;
--> statement-breakpoint
CREATE TRIGGER `schedules_status_check_update` BEFORE UPDATE OF `status` ON `schedules`
WHEN NEW.`status` NOT IN ('active', 'paused', 'removed')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: schedules.status');
END;
--> statement-breakpoint
UPDATE `schedules` SET `status` = `status` WHERE `status` NOT IN ('active', 'paused', 'removed');
--> statement-breakpoint
-- schedule_runs.status: domain/schedule.ts RUN_STATUSES.
CREATE TRIGGER `schedule_runs_status_check_insert` BEFORE INSERT ON `schedule_runs`
WHEN NEW.`status` NOT IN ('pending', 'complete', 'failed', 'canceled')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: schedule_runs.status');
END;
--> statement-breakpoint
CREATE TRIGGER `schedule_runs_status_check_update` BEFORE UPDATE OF `status` ON `schedule_runs`
WHEN NEW.`status` NOT IN ('pending', 'complete', 'failed', 'canceled')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: schedule_runs.status');
END;
--> statement-breakpoint
UPDATE `schedule_runs` SET `status` = `status` WHERE `status` NOT IN ('pending', 'complete', 'failed', 'canceled');
