-- Hand-written: llm_queue_depth holds the number of queued work items, kept exact by these triggers in
-- the same transaction as every change of llm_work_items, so backpressure reads one row instead of
-- counting the queue. `UPDATE OF status` fires only when the status column is set; the WHEN clauses
-- keep the triggers off every change that does not enter or leave 'queued'.
INSERT INTO `llm_queue_depth` (`id`, `queued`) SELECT 1, count(*) FROM `llm_work_items` WHERE `status` = 'queued';
--> statement-breakpoint
CREATE TRIGGER `work_items_queue_depth_insert` AFTER INSERT ON `llm_work_items`
WHEN NEW.`status` = 'queued'
BEGIN
  UPDATE `llm_queue_depth` SET `queued` = `queued` + 1 WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `work_items_queue_depth_enter` AFTER UPDATE OF `status` ON `llm_work_items`
WHEN OLD.`status` != 'queued' AND NEW.`status` = 'queued'
BEGIN
  UPDATE `llm_queue_depth` SET `queued` = `queued` + 1 WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `work_items_queue_depth_leave` AFTER UPDATE OF `status` ON `llm_work_items`
WHEN OLD.`status` = 'queued' AND NEW.`status` != 'queued'
BEGIN
  UPDATE `llm_queue_depth` SET `queued` = `queued` - 1 WHERE `id` = 1;
END;
--> statement-breakpoint
CREATE TRIGGER `work_items_queue_depth_delete` AFTER DELETE ON `llm_work_items`
WHEN OLD.`status` = 'queued'
BEGIN
  UPDATE `llm_queue_depth` SET `queued` = `queued` - 1 WHERE `id` = 1;
END;
