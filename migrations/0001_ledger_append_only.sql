-- Hand-written: the ledger is append-only, enforced by the database itself, so that no code path
-- (ours, a script, or a person with the sqlite3 shell) can rewrite what was paid for.
CREATE TRIGGER `ledger_entries_no_update` BEFORE UPDATE ON `llm_ledger_entries`
BEGIN
  SELECT RAISE(ABORT, 'llm_ledger_entries is append-only: UPDATE refused');
END;
--> statement-breakpoint
CREATE TRIGGER `ledger_entries_no_delete` BEFORE DELETE ON `llm_ledger_entries`
BEGIN
  SELECT RAISE(ABORT, 'llm_ledger_entries is append-only: DELETE refused');
END;
