-- Hand-written: the one sanctioned way to remove ledger entries (`combine prune`). An entry may be
-- deleted only when a checkpoint already covers its seq; a checkpoint may be inserted only when it
-- describes entries that exist (its hashes match them and the run has no holes); checkpoints themselves
-- are append-only. So no code path can remove an entry without leaving the link `ledger verify` needs.
DROP TRIGGER `ledger_entries_no_delete`;
--> statement-breakpoint
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
--> statement-breakpoint
CREATE TRIGGER `ledger_checkpoints_match_entries` BEFORE INSERT ON `llm_ledger_checkpoints`
WHEN NEW.`to_seq` < NEW.`from_seq`
  OR NOT EXISTS (SELECT 1 FROM `llm_ledger_entries` WHERE `seq` = NEW.`from_seq` AND `prev_hash` = NEW.`hash_before`)
  OR NOT EXISTS (SELECT 1 FROM `llm_ledger_entries` WHERE `seq` = NEW.`to_seq` AND `hash` = NEW.`hash_after`)
  OR (SELECT count(*) FROM `llm_ledger_entries` WHERE `seq` BETWEEN NEW.`from_seq` AND NEW.`to_seq`) != NEW.`to_seq` - NEW.`from_seq` + 1
BEGIN
  SELECT RAISE(ABORT, 'a ledger checkpoint must describe a run of entries that exist, with their hashes');
END;
--> statement-breakpoint
CREATE TRIGGER `ledger_checkpoints_no_update` BEFORE UPDATE ON `llm_ledger_checkpoints`
BEGIN
  SELECT RAISE(ABORT, 'llm_ledger_checkpoints is append-only: UPDATE refused');
END;
--> statement-breakpoint
CREATE TRIGGER `ledger_checkpoints_no_delete` BEFORE DELETE ON `llm_ledger_checkpoints`
BEGIN
  SELECT RAISE(ABORT, 'llm_ledger_checkpoints is append-only: DELETE refused');
END;
