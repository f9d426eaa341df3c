/** Migration folders cut short, to write a home as an older version left it. */
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './harness.js';

/**
 * A copy of the shipped migrations (`migrations`, or `migrations/pg`) up to, not including, `tag`, in a
 * new directory pushed onto `dirs` for the caller to remove.
 */
export function migrationsBefore(tag: string, dirs: string[], folder = 'migrations'): string {
  const dir = mkdtempSync(join(tmpdir(), 'cmb-mig-'));
  dirs.push(dir);
  cpSync(join(ROOT, folder), dir, { recursive: true });
  const journalPath = join(dir, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8')) as { entries: { tag: string }[] };
  journal.entries = journal.entries.slice(
    0,
    journal.entries.findIndex((e) => e.tag === tag),
  );
  writeFileSync(journalPath, JSON.stringify(journal));
  return dir;
}
