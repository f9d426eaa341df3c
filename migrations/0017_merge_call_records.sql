-- Issue 20: one row per call instead of three writes. The call's telemetry moves onto its charge (the
-- settle or close that ends the call writes it), and whether a call's answer was applied is named by
-- the mutation that applied it instead of an UPDATE of the charge.
ALTER TABLE `llm_charges` ADD `outcome` text;--> statement-breakpoint
ALTER TABLE `llm_charges` ADD `http_status` integer;--> statement-breakpoint
ALTER TABLE `llm_charges` ADD `latency_ms` integer;--> statement-breakpoint
ALTER TABLE `llm_charges` ADD `provider_request_id` text;--> statement-breakpoint
ALTER TABLE `mutations` ADD `response_seq` integer;--> statement-breakpoint
CREATE INDEX `idx_mutations_response` ON `mutations` (`response_seq`) WHERE response_seq IS NOT NULL;--> statement-breakpoint
-- A call record was written in the transaction that settled or closed its charge, so both carry that
-- transaction's time. Records without a charge (calls made before charges existed) are not kept: their
-- answers and errors are in the ledger's `response` and `error` entries, which hold the same fields.
UPDATE `llm_charges` SET
  `outcome` = r.`outcome`, `http_status` = r.`http_status`, `latency_ms` = r.`latency_ms`,
  `provider_request_id` = r.`provider_request_id`
FROM `llm_call_records` r
WHERE r.`work_item_id` = `llm_charges`.`work_item_id` AND r.`created_at` = `llm_charges`.`settled_at`;--> statement-breakpoint
-- A thread applies at most one answer (its one mutation), and a replayed answer marked the original
-- call's charge, which belongs to the same thread: the thread's applied charge names its mutation's answer.
UPDATE `mutations` SET `response_seq` = (
  SELECT max(c.`response_seq`) FROM `llm_charges` c WHERE c.`thread_id` = `mutations`.`thread_id` AND c.`applied` = 1
);--> statement-breakpoint
DROP TABLE `llm_call_records`;--> statement-breakpoint
ALTER TABLE `llm_charges` DROP COLUMN `applied`;
