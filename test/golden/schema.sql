-- index idx_charges_project_day
CREATE INDEX `idx_charges_project_day` ON `llm_charges` (`project_id`,`day`);

-- index idx_charges_thread
CREATE INDEX `idx_charges_thread` ON `llm_charges` (`thread_id`);

-- index idx_document_parts_ord
CREATE INDEX `idx_document_parts_ord` ON `document_parts` (`document_id`,`ord`);

-- index idx_ledger_imports_import
CREATE INDEX `idx_ledger_imports_import` ON `llm_ledger_imports` (`import_id`);

-- index idx_ledger_thread
CREATE INDEX `idx_ledger_thread` ON `llm_ledger_entries` (`thread_id`,`seq`);

-- index idx_ledger_work_item
CREATE INDEX `idx_ledger_work_item` ON `llm_ledger_entries` (`work_item_id`,`seq`);

-- index idx_mutations_response
CREATE INDEX `idx_mutations_response` ON `mutations` (`response_seq`) WHERE response_seq IS NOT NULL;

-- index idx_schedule_runs_pending
CREATE INDEX `idx_schedule_runs_pending` ON `schedule_runs` (`claimed_at`) WHERE status = 'pending';

-- index idx_schedule_runs_thread
CREATE INDEX `idx_schedule_runs_thread` ON `schedule_runs` (`thread_id`) WHERE thread_id IS NOT NULL;

-- index idx_schedules_id_tail
CREATE INDEX `idx_schedules_id_tail` ON `schedules` (substr("id", 25));

-- index idx_threads_active
CREATE INDEX `idx_threads_active` ON `llm_threads` (`created_at`) WHERE status IN ('open', 'running');

-- index idx_threads_created
CREATE INDEX `idx_threads_created` ON `llm_threads` (`created_at`);

-- index idx_threads_ended_badly
CREATE INDEX `idx_threads_ended_badly` ON `llm_threads` (`created_at`) WHERE status IN ('failed', 'canceled');

-- index idx_threads_id_tail
CREATE INDEX `idx_threads_id_tail` ON `llm_threads` (substr("id", 25));

-- index idx_threads_key_complete
CREATE INDEX `idx_threads_key_complete` ON `llm_threads` (`idempotency_key`,`created_at`) WHERE status = 'complete';

-- index idx_threads_kind_created
CREATE INDEX `idx_threads_kind_created` ON `llm_threads` (`kind`,`created_at`);

-- index idx_threads_parent_status
CREATE INDEX `idx_threads_parent_status` ON `llm_threads` (`parent_thread_id`,`status`) WHERE parent_thread_id IS NOT NULL;

-- index idx_threads_space_created
CREATE INDEX `idx_threads_space_created` ON `llm_threads` (`space_id`,`created_at`);

-- index idx_work_items_claimable
CREATE INDEX `idx_work_items_claimable` ON `llm_work_items` (`priority`,`not_before`,`lock_scope`) WHERE status = 'queued';

-- index idx_work_items_deadline
CREATE INDEX `idx_work_items_deadline` ON `llm_work_items` (`deadline_at`) WHERE status = 'queued' AND deadline_at IS NOT NULL;

-- index idx_work_items_fair
CREATE INDEX `idx_work_items_fair` ON `llm_work_items` (`project_id`,`priority`,`not_before`) WHERE status = 'queued';

-- index idx_work_items_id_tail
CREATE INDEX `idx_work_items_id_tail` ON `llm_work_items` (substr("id", 25));

-- index idx_work_items_leased
CREATE INDEX `idx_work_items_leased` ON `llm_work_items` (`lease_expires_at`) WHERE status IN ('claimed', 'running');

-- index idx_work_items_parked
CREATE INDEX `idx_work_items_parked` ON `llm_work_items` (`project_id`) WHERE status = 'queued' AND error_code = 'BUDGET_EXCEEDED';

-- index mutations_work_item_id_unique
CREATE UNIQUE INDEX `mutations_work_item_id_unique` ON `mutations` (`work_item_id`);

-- index uq_charges_open_reservation
CREATE UNIQUE INDEX `uq_charges_open_reservation` ON `llm_charges` (`work_item_id`) WHERE status = 'reserved';

-- index uq_charges_response
CREATE UNIQUE INDEX `uq_charges_response` ON `llm_charges` (`response_seq`) WHERE response_seq IS NOT NULL;

-- index uq_documents_project_type_key
CREATE UNIQUE INDEX `uq_documents_project_type_key` ON `documents` (`project_id`,`doc_type`,`doc_key`);

-- index uq_schedule_runs_period
CREATE UNIQUE INDEX `uq_schedule_runs_period` ON `schedule_runs` (`schedule_id`,`period_key`);

-- index uq_threads_idempotency_active
CREATE UNIQUE INDEX `uq_threads_idempotency_active` ON `llm_threads` (`idempotency_key`) WHERE status IN ('open', 'running');

-- index uq_work_items_thread_sequence
CREATE UNIQUE INDEX `uq_work_items_thread_sequence` ON `llm_work_items` (`thread_id`,`sequence`);

-- table __drizzle_migrations
CREATE TABLE "__drizzle_migrations" (
				id SERIAL PRIMARY KEY,
				hash text NOT NULL,
				created_at numeric
			);

-- table document_parts
CREATE TABLE `document_parts` (
	`document_id` text NOT NULL,
	`part_key` text NOT NULL,
	`ord` real NOT NULL,
	`content` text NOT NULL, `version` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`document_id`, `part_key`),
	FOREIGN KEY (`document_id`) REFERENCES `documents`(`id`) ON UPDATE no action ON DELETE no action
);

-- table documents
CREATE TABLE `documents` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`doc_type` text NOT NULL,
	`version` integer NOT NULL,
	`content` text NOT NULL,
	`updated_at` integer NOT NULL, `doc_key` text DEFAULT '' NOT NULL, `parts_field` text, `parts_key` text, `parts_chars` integer DEFAULT 0 NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE no action
);

-- table llm_charges
CREATE TABLE `llm_charges` (
	`id` text PRIMARY KEY NOT NULL,
	`work_item_id` text NOT NULL,
	`thread_id` text NOT NULL,
	`project_id` text NOT NULL,
	`model` text NOT NULL,
	`attempt` integer NOT NULL,
	`repair` integer NOT NULL,
	`status` text NOT NULL,
	`day` text NOT NULL,
	`reserved_tokens` integer NOT NULL,
	`reserved_cost_usd` real NOT NULL,
	`prompt_tokens` integer,
	`completion_tokens` integer,
	`total_tokens` integer,
	`cost_usd` real,
	`response_seq` integer,
	`created_at` integer NOT NULL,
	`settled_at` integer, `outcome` text, `http_status` integer, `latency_ms` integer, `provider_request_id` text,
	FOREIGN KEY (`work_item_id`) REFERENCES `llm_work_items`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`thread_id`) REFERENCES `llm_threads`(`id`) ON UPDATE no action ON DELETE no action
);

-- table llm_ledger_checkpoints
CREATE TABLE `llm_ledger_checkpoints` (
	`from_seq` integer PRIMARY KEY NOT NULL,
	`to_seq` integer NOT NULL,
	`hash_before` text NOT NULL,
	`hash_after` text NOT NULL,
	`prune_id` text NOT NULL,
	`cutoff_at` integer NOT NULL,
	`created_at` integer NOT NULL
);

-- table llm_ledger_entries
CREATE TABLE `llm_ledger_entries` (
	`seq` integer PRIMARY KEY NOT NULL,
	`thread_id` text NOT NULL,
	`work_item_id` text,
	`entry_type` text NOT NULL,
	`attempt` integer,
	`payload` text NOT NULL,
	`prev_hash` text NOT NULL,
	`hash` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`thread_id`) REFERENCES `llm_threads`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`work_item_id`) REFERENCES `llm_work_items`(`id`) ON UPDATE no action ON DELETE no action
);

-- table llm_ledger_imports
CREATE TABLE `llm_ledger_imports` (
	`seq` integer PRIMARY KEY NOT NULL,
	`import_id` text NOT NULL,
	`source_seq` integer NOT NULL,
	`source_prev_hash` text NOT NULL,
	`source_hash` text NOT NULL
);

-- table llm_project_spend
CREATE TABLE `llm_project_spend` (
	`project_id` text NOT NULL,
	`day` text NOT NULL,
	`tokens` integer NOT NULL,
	`cost_usd` real NOT NULL,
	PRIMARY KEY(`project_id`, `day`)
);

-- table llm_queue_depth
CREATE TABLE `llm_queue_depth` (
	`id` integer PRIMARY KEY NOT NULL,
	`queued` integer NOT NULL
);

-- table llm_response_cache
CREATE TABLE `llm_response_cache` (
	`request_hash` text PRIMARY KEY NOT NULL,
	`prompt_seq` integer NOT NULL,
	`response_seq` integer NOT NULL,
	`created_at` integer NOT NULL
);

-- table llm_threads
CREATE TABLE `llm_threads` (
	`id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`space_type` text NOT NULL,
	`space_id` text NOT NULL,
	`target_ref` text NOT NULL,
	`status` text DEFAULT 'open' NOT NULL,
	`parent_thread_id` text,
	`idempotency_key` text NOT NULL,
	`created_by` text,
	`created_at` integer NOT NULL,
	`closed_at` integer, `role` text DEFAULT 'work' NOT NULL, `input` text DEFAULT '{}' NOT NULL, `traceparent` text,
	FOREIGN KEY (`parent_thread_id`) REFERENCES `llm_threads`(`id`) ON UPDATE no action ON DELETE no action
);

-- table llm_work_items
CREATE TABLE `llm_work_items` (
	`id` text PRIMARY KEY NOT NULL,
	`thread_id` text NOT NULL,
	`sequence` integer DEFAULT 1 NOT NULL,
	`status` text DEFAULT 'queued' NOT NULL,
	`attempt` integer DEFAULT 1 NOT NULL,
	`max_attempts` integer DEFAULT 3 NOT NULL,
	`repair_count` integer DEFAULT 0 NOT NULL,
	`lock_scope` text NOT NULL,
	`priority` integer DEFAULT 0 NOT NULL,
	`not_before` integer NOT NULL,
	`deadline_at` integer,
	`lease_owner` text,
	`lease_expires_at` integer,
	`error_code` text,
	`error_message` text,
	`created_at` integer NOT NULL,
	`started_at` integer,
	`finished_at` integer, `project_id` text DEFAULT '' NOT NULL, `escalated` integer DEFAULT 0 NOT NULL,
	FOREIGN KEY (`thread_id`) REFERENCES `llm_threads`(`id`) ON UPDATE no action ON DELETE no action
);

-- table locks
CREATE TABLE `locks` (
	`scope` text PRIMARY KEY NOT NULL,
	`owner` text NOT NULL,
	`acquired_at` integer NOT NULL,
	`expires_at` integer
);

-- table mutations
CREATE TABLE `mutations` (
	`id` text PRIMARY KEY NOT NULL,
	`work_item_id` text NOT NULL,
	`thread_id` text NOT NULL,
	`document_id` text NOT NULL,
	`from_version` integer NOT NULL,
	`to_version` integer NOT NULL,
	`summary` text NOT NULL,
	`created_at` integer NOT NULL, `response_seq` integer,
	FOREIGN KEY (`work_item_id`) REFERENCES `llm_work_items`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`thread_id`) REFERENCES `llm_threads`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`document_id`) REFERENCES `documents`(`id`) ON UPDATE no action ON DELETE no action
);

-- table projects
CREATE TABLE `projects` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL
);

-- table schedule_runs
CREATE TABLE `schedule_runs` (
	`id` text PRIMARY KEY NOT NULL,
	`schedule_id` text NOT NULL,
	`period_key` text NOT NULL,
	`period_at` integer NOT NULL,
	`status` text NOT NULL,
	`claim_owner` text NOT NULL,
	`claimed_at` integer NOT NULL,
	`claims` integer DEFAULT 1 NOT NULL,
	`thread_id` text,
	`error_message` text,
	`responses` integer,
	`prompt_tokens` integer,
	`completion_tokens` integer,
	`total_tokens` integer,
	`created_at` integer NOT NULL,
	`finished_at` integer,
	FOREIGN KEY (`schedule_id`) REFERENCES `schedules`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`thread_id`) REFERENCES `llm_threads`(`id`) ON UPDATE no action ON DELETE no action
);

-- table schedules
CREATE TABLE `schedules` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`operation` text NOT NULL,
	`cron` text NOT NULL,
	`timezone` text NOT NULL,
	`catch_up` text NOT NULL,
	`status` text NOT NULL,
	`active_from` integer NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL, `input` text DEFAULT '{}' NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE no action
);

-- trigger charges_status_check_insert
CREATE TRIGGER `charges_status_check_insert` BEFORE INSERT ON `llm_charges`
WHEN NEW.`status` NOT IN ('reserved', 'settled', 'in_doubt', 'released')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_charges.status');
END;

-- trigger charges_status_check_update
CREATE TRIGGER `charges_status_check_update` BEFORE UPDATE OF `status` ON `llm_charges`
WHEN NEW.`status` NOT IN ('reserved', 'settled', 'in_doubt', 'released')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_charges.status');
END;

-- trigger ledger_checkpoints_match_entries
CREATE TRIGGER `ledger_checkpoints_match_entries` BEFORE INSERT ON `llm_ledger_checkpoints`
WHEN NEW.`to_seq` < NEW.`from_seq`
  OR NOT EXISTS (SELECT 1 FROM `llm_ledger_entries` WHERE `seq` = NEW.`from_seq` AND `prev_hash` = NEW.`hash_before`)
  OR NOT EXISTS (SELECT 1 FROM `llm_ledger_entries` WHERE `seq` = NEW.`to_seq` AND `hash` = NEW.`hash_after`)
  OR (SELECT count(*) FROM `llm_ledger_entries` WHERE `seq` BETWEEN NEW.`from_seq` AND NEW.`to_seq`) != NEW.`to_seq` - NEW.`from_seq` + 1
BEGIN
  SELECT RAISE(ABORT, 'a ledger checkpoint must describe a run of entries that exist, with their hashes');
END;

-- trigger ledger_checkpoints_no_delete
CREATE TRIGGER `ledger_checkpoints_no_delete` BEFORE DELETE ON `llm_ledger_checkpoints`
BEGIN
  SELECT RAISE(ABORT, 'llm_ledger_checkpoints is append-only: DELETE refused');
END;

-- trigger ledger_checkpoints_no_update
CREATE TRIGGER `ledger_checkpoints_no_update` BEFORE UPDATE ON `llm_ledger_checkpoints`
BEGIN
  SELECT RAISE(ABORT, 'llm_ledger_checkpoints is append-only: UPDATE refused');
END;

-- trigger ledger_entries_delete_only_checkpointed
CREATE TRIGGER `ledger_entries_delete_only_checkpointed` BEFORE DELETE ON `llm_ledger_entries`
WHEN NOT EXISTS (
  SELECT 1 FROM (
    -- Runs never overlap: the only run that can cover OLD.seq is the last one starting at or before it.
    SELECT `to_seq` FROM `llm_ledger_checkpoints` WHERE `from_seq` <= OLD.`seq` ORDER BY `from_seq` DESC LIMIT 1
  ) WHERE `to_seq` >= OLD.`seq`
)
BEGIN
  SELECT RAISE(ABORT, 'llm_ledger_entries is append-only: DELETE refused (only combine prune removes entries, under a checkpoint)');
END;

-- trigger ledger_entries_no_update
CREATE TRIGGER `ledger_entries_no_update` BEFORE UPDATE ON `llm_ledger_entries`
BEGIN
  SELECT RAISE(ABORT, 'llm_ledger_entries is append-only: UPDATE refused');
END;

-- trigger schedule_runs_status_check_insert
CREATE TRIGGER `schedule_runs_status_check_insert` BEFORE INSERT ON `schedule_runs`
WHEN NEW.`status` NOT IN ('pending', 'complete', 'failed', 'canceled')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: schedule_runs.status');
END;

-- trigger schedule_runs_status_check_update
CREATE TRIGGER `schedule_runs_status_check_update` BEFORE UPDATE OF `status` ON `schedule_runs`
WHEN NEW.`status` NOT IN ('pending', 'complete', 'failed', 'canceled')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: schedule_runs.status');
END;

-- trigger schedules_status_check_insert
CREATE TRIGGER `schedules_status_check_insert` BEFORE INSERT ON `schedules`
WHEN NEW.`status` NOT IN ('active', 'paused', 'removed')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: schedules.status');
END;

-- trigger schedules_status_check_update
CREATE TRIGGER `schedules_status_check_update` BEFORE UPDATE OF `status` ON `schedules`
WHEN NEW.`status` NOT IN ('active', 'paused', 'removed')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: schedules.status');
END;

-- trigger threads_status_check_insert
CREATE TRIGGER `threads_status_check_insert` BEFORE INSERT ON `llm_threads`
WHEN NEW.`status` NOT IN ('open', 'running', 'complete', 'failed', 'canceled')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_threads.status');
END;

-- trigger threads_status_check_update
CREATE TRIGGER `threads_status_check_update` BEFORE UPDATE OF `status` ON `llm_threads`
WHEN NEW.`status` NOT IN ('open', 'running', 'complete', 'failed', 'canceled')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_threads.status');
END;

-- trigger work_items_queue_depth_delete
CREATE TRIGGER `work_items_queue_depth_delete` AFTER DELETE ON `llm_work_items`
WHEN OLD.`status` = 'queued'
BEGIN
  UPDATE `llm_queue_depth` SET `queued` = `queued` - 1 WHERE `id` = 1;
END;

-- trigger work_items_queue_depth_enter
CREATE TRIGGER `work_items_queue_depth_enter` AFTER UPDATE OF `status` ON `llm_work_items`
WHEN OLD.`status` != 'queued' AND NEW.`status` = 'queued'
BEGIN
  UPDATE `llm_queue_depth` SET `queued` = `queued` + 1 WHERE `id` = 1;
END;

-- trigger work_items_queue_depth_insert
CREATE TRIGGER `work_items_queue_depth_insert` AFTER INSERT ON `llm_work_items`
WHEN NEW.`status` = 'queued'
BEGIN
  UPDATE `llm_queue_depth` SET `queued` = `queued` + 1 WHERE `id` = 1;
END;

-- trigger work_items_queue_depth_leave
CREATE TRIGGER `work_items_queue_depth_leave` AFTER UPDATE OF `status` ON `llm_work_items`
WHEN OLD.`status` = 'queued' AND NEW.`status` != 'queued'
BEGIN
  UPDATE `llm_queue_depth` SET `queued` = `queued` - 1 WHERE `id` = 1;
END;

-- trigger work_items_status_check_insert
CREATE TRIGGER `work_items_status_check_insert` BEFORE INSERT ON `llm_work_items`
WHEN NEW.`status` NOT IN ('queued', 'claimed', 'running', 'applied', 'failed', 'dead_letter')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_work_items.status');
END;

-- trigger work_items_status_check_update
CREATE TRIGGER `work_items_status_check_update` BEFORE UPDATE OF `status` ON `llm_work_items`
WHEN NEW.`status` NOT IN ('queued', 'claimed', 'running', 'applied', 'failed', 'dead_letter')
BEGIN
  SELECT RAISE(ABORT, 'CHECK constraint failed: llm_work_items.status');
END;
