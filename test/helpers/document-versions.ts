/**
 * A backlog document (`d` of project `p` unless named) stored in parts (field `epics`, key `id`), written version by
 * version the way engine/document-write.ts writes it: the first version whole into parts, each next one
 * as the plan from the version before.
 */
import type { Sql } from '../../src/core/sql.js';
import { writeDocumentParts } from '../../src/db/document-parts.js';
import { insertDocument, updateDocumentHead } from '../../src/db/projects.js';
import { planParts, rewritePlan, splitDocument } from '../../src/domain/document-parts.js';

export const BACKLOG_LAYOUT = { field: 'epics', key: 'id' };
const split = (content: unknown) => splitDocument(content, BACKLOG_LAYOUT)!;

/** A backlog document of one project: its id, and its project's. */
export interface BacklogDocument {
  id: string;
  project_id: string;
}

/** Writes version `version` + 1 of document `doc` (`d` of project `p`), from `before` (null: none yet, `version` 0) to `after`. */
export async function writeNextVersion(
  sql: Sql,
  version: number,
  before: unknown,
  after: unknown,
  doc: BacklogDocument = { id: 'd', project_id: 'p' },
): Promise<void> {
  const first = version === 0;
  const plan = first ? rewritePlan(split(after), BACKLOG_LAYOUT)! : planParts(split(before), split(after), BACKLOG_LAYOUT)!;
  const columns = { content: plan.head, updated_at: 1, parts_field: 'epics', parts_key: 'id' };
  if (first && plan.kind === 'rewrite')
    await insertDocument(sql, { id: doc.id, project_id: doc.project_id, doc_type: 'backlog', version: 1, ...columns, parts_chars: plan.chars });
  const head = (await sql.get<{ parts_chars: number }>('SELECT parts_chars FROM documents WHERE id = ?', [doc.id]))!;
  const written = await writeDocumentParts(sql, doc.id, plan, {
    version: version + 1,
    partsChars: head.parts_chars,
    rewrite: () => rewritePlan(split(after), BACKLOG_LAYOUT)!,
    headFollows: !first,
  });
  if (!first) await updateDocumentHead(sql, { id: doc.id, from_version: version, ...columns, parts_chars: written.partsChars }, written.along);
}
