/**
 * Where a plan's new parts of a document go (db/document-parts.ts `writeDocumentParts` writes them): each run
 * of new parts between its two neighbours' orders (domain/document-parts.ts `ordsBetween`), and when a run
 * finds no room, a few neighbours on each side moved apart first (ord-only guarded UPDATEs), so that a
 * backlog's parts are not all written again.
 */
import type { Sql } from '../core/sql.js';
import { ordsBetween, ordsBetweenWithRoom, spreadOrds, type PartsPlan } from '../domain/document-parts.js';
import { noSpreadAgain, queuedPartsOf, queuedPlacesOf, queuedRemovalsOf, queuePart, spreadRefused, writesDocumentsAgain } from './document-parts-queued.js';
import { inJsonArray, inJsonArrayInitPlanPg } from './dialect.js';
import { runGuardedAtCommit } from './statements.js';

/** A new part to insert: at its ord, or next to a neighbour, `by` from the neighbour's ord. */
export type PlacedPart = { key: string; text: string } & ({ ord: number } | { next: { to: string; by: number } });

/** A part's place, as a plan sees it: the table's order, or the one this transaction queued for it. */
interface PartOrd {
  key: string;
  ord: number;
}

const DOCUMENT_PARTS_DOWN_FROM = 'SELECT part_key AS key, ord FROM document_parts WHERE document_id = ? AND ord <= ? ORDER BY ord DESC LIMIT ?';
const DOCUMENT_PARTS_UP_FROM = 'SELECT part_key AS key, ord FROM document_parts WHERE document_id = ? AND ord >= ? ORDER BY ord LIMIT ?';

/** At most `limit` of a document's parts from order `ord` (included) down or up, nearest first (the table's; idx_document_parts_ord). */
function getDocumentPartsFrom(sql: Sql, documentId: string, ord: number, direction: 'down' | 'up', limit: number): Promise<PartOrd[]> {
  return sql.all<PartOrd>(direction === 'down' ? DOCUMENT_PARTS_DOWN_FROM : DOCUMENT_PARTS_UP_FROM, [documentId, ord, limit]);
}

const UPDATE_DOCUMENT_PART_ORD = 'UPDATE document_parts SET ord = @ord WHERE document_id = @document_id AND part_key = @part_key';

/**
 * A part moved to a new order between the same neighbours, guarded (the part is there); its content and
 * version stay (a reader that has its text keeps it). Where the plan's inserts run (`runGuardedAtCommit`),
 * before them: an insert placed next to this part reads its new order.
 */
function updateDocumentPartOrd(sql: Sql, documentId: string, key: string, ord: number): Promise<void> {
  if (writesDocumentsAgain(sql)) queuePart(sql, documentId, key, { from: null, by: ord });
  else if (sql.atCommit) queuedPartsOf(sql).add(documentId);
  return runGuardedAtCommit(sql, UPDATE_DOCUMENT_PART_ORD, { ord, document_id: documentId, part_key: key }, `document ${documentId} has no part "${key}"`);
}

// Postgres: the keys as an InitPlan's array (dialect.ts `inJsonArrayInitPlanPg`), so the connection keeps one generic
// plan; a constant array made its custom plan cheaper and it was planned again at every call (1.01–1.02 plans per call,
// bench/README's 2026-11-26 15:24 section, runs b1 and b2).
const DOCUMENT_PART_ORDS_OF_SQLITE = `SELECT part_key AS key, ord FROM document_parts WHERE document_id = @document_id AND ${inJsonArray('sqlite', 'part_key', '@keys')}`;
const DOCUMENT_PART_ORDS_OF_PG = `SELECT part_key AS key, ord FROM document_parts WHERE document_id = @document_id AND ${inJsonArrayInitPlanPg('part_key', '@keys')}`;

/** The orders of those of a document's parts `keys` names that the table has, read in one statement. */
function getDocumentPartOrdsOf(sql: Sql, documentId: string, keys: readonly string[]): Promise<PartOrd[]> {
  const text = sql.dialect === 'postgres' ? DOCUMENT_PART_ORDS_OF_PG : DOCUMENT_PART_ORDS_OF_SQLITE;
  return sql.all<PartOrd>(text, { document_id: documentId, keys: JSON.stringify(keys) });
}

/** The orders of a document's parts `keys` (each must exist), read in one statement; none when `keys` is empty. */
async function requireDocumentPartOrds(sql: Sql, documentId: string, keys: readonly string[]): Promise<Map<string, number>> {
  const unique = [...new Set(keys)];
  const rows = unique.length === 0 ? [] : await getDocumentPartOrdsOf(sql, documentId, unique);
  const ords = new Map<string, number>();
  for (const r of rows) ords.set(r.key, r.ord);
  for (const key of unique) if (!ords.has(key)) throw new Error(`document ${documentId} has no part "${key}"`);
  return ords;
}

/**
 * `requireDocumentPartOrds` as this transaction's queued writes leave the document (`QueuedPlace`): a queued
 * part's ord from its `from` part's as the table has it (one statement for all; none when none has one).
 */
async function getPlannedPartOrds(sql: Sql, documentId: string, keys: readonly string[]): Promise<Map<string, number>> {
  const places = queuedPlacesOf(sql, documentId);
  const placed = keys.map((key) => places.get(key) ?? { from: key, by: 0 });
  const read = await requireDocumentPartOrds(
    sql,
    documentId,
    placed.flatMap((p) => (p.from === null ? [] : [p.from])),
  );
  return new Map(keys.map((key, i) => [key, (placed[i]!.from === null ? 0 : read.get(placed[i]!.from!)!) + placed[i]!.by]));
}

/** The parts a handle that writes documents again queued for document `documentId`, at their planned orders (`QueuedPlace`). */
async function queuedPartOrds(sql: Sql, documentId: string): Promise<PartOrd[]> {
  const places = [...queuedPlacesOf(sql, documentId).keys()];
  const ords = await getPlannedPartOrds(sql, documentId, places);
  return places.map((key) => ({ key, ord: ords.get(key)! }));
}

/** Windows of neighbours a spread tries on each side of a run, until their orders leave room (the last: all of them). */
const SPREAD_WINDOWS = [4, 16, 64, 256, 1024, 2 ** 31];

/**
 * Room for a run of `n` new parts between `after` and `before` when their orders are too close: the
 * nearest `w` parts on each side (these two included) are spaced evenly between the (w+1)-th on each side
 * (or the document's open end), with `w` the smallest window whose orders leave room (`spreadOrds`) —
 * the parts moved are the crowded neighbourhood's, never the document's unless it is crowded all through.
 * Returns the run's orders and the parts moved (their new orders written here), or null when this
 * transaction's plan of the document cannot be read from the table (`spreadDone`).
 */
async function spreadNeighbours(
  sql: Sql,
  documentId: string,
  run: { after: PartOrd; before: PartOrd; n: number; removed: readonly string[] },
): Promise<{ ords: number[]; moved: PartOrd[] } | null> {
  if (spreadRefused(sql, documentId)) return null;
  const again = writesDocumentsAgain(sql);
  // On a handle that writes documents again, this transaction's parts are queued, not in the table yet: its
  // new (or moved) parts are taken at their planned orders, its deleted ones left out.
  const queued = again ? await queuedPartOrds(sql, documentId) : [];
  const skip = new Set([...run.removed, ...(again ? queuedRemovalsOf(sql, documentId) : []), ...queued.map((q) => q.key)]);
  const nearest = async (from: PartOrd, direction: 'down' | 'up', count: number) => {
    const rows = await getDocumentPartsFrom(sql, documentId, from.ord, direction, count + skip.size);
    const side = (p: PartOrd) => (direction === 'down' ? p.ord <= from.ord : p.ord >= from.ord);
    const parts = [...rows.filter((p) => !skip.has(p.key)), ...queued.filter(side)];
    return parts.sort((a, b) => (direction === 'down' ? b.ord - a.ord : a.ord - b.ord)).slice(0, count);
  };
  for (const w of SPREAD_WINDOWS) {
    const down = await nearest(run.after, 'down', w + 1);
    const up = await nearest(run.before, 'up', w + 1);
    const left = down.slice(0, w).reverse();
    const right = up.slice(0, w);
    const ords = spreadOrds(down[w]?.ord ?? null, up[w]?.ord ?? null, left.length + run.n + right.length, w);
    if (!ords) continue;
    const moved = [...left.map((p, i) => ({ key: p.key, ord: ords[i]! })), ...right.map((p, i) => ({ key: p.key, ord: ords[left.length + run.n + i]! }))];
    // On a handle that writes documents again, a place queued from a part moved now stays right as it is:
    // its insert runs before the move at COMMIT, and its `from` is read from the table, where the part keeps
    // its order until then; a place queued after the move, next to that part, starts from the part's new place.
    if (again) noSpreadAgain(sql, documentId);
    for (const m of moved) await updateDocumentPartOrd(sql, documentId, m.key, m.ord);
    return { ords: ords.slice(left.length, left.length + run.n), moved };
  }
  return null;
}

/**
 * Where the plan's new parts go, or null when some run finds no order between its neighbours (every part
 * written again). A run short of room moves its neighbours apart (`spreadNeighbours`, once per plan); the
 * runs are then placed again from the start, every one between its neighbours' orders after the move: a
 * run placed before it may sit inside the parts moved, and orders taken before the move would put its parts
 * among other neighbours.
 */
export async function placeRuns(sql: Sql, documentId: string, plan: PartsPlan & { kind: 'incremental' }): Promise<PlacedPart[] | null> {
  // The orders of the runs' neighbours, read once, for all runs in one statement: a move below changes only the
  // parts it moved (`moved`). A run's neighbours exist before this plan's writes (a run never borders another
  // run's parts): in the table, or queued by an earlier write of this transaction on a handle that writes documents again.
  const read = writesDocumentsAgain(sql) ? getPlannedPartOrds : requireDocumentPartOrds;
  const between = plan.inserted.flatMap(({ after, before }) => (after !== null && before !== null ? [after, before] : []));
  const found = await read(sql, documentId, between);
  // One move per write, and only when one run is short of room: with two, the second would take the midpoints and,
  // finding none, write every part again — which a handle that queues the move for its COMMIT cannot do after it
  // (`assertNoQueuedParts`). So two runs short of room move nothing, as before moves existed.
  let short = 0;
  for (const { after, before, parts } of plan.inserted) {
    if (after !== null && before !== null && !ordsBetweenWithRoom(found.get(after)!, found.get(before)!, parts.length)) short++;
  }
  const mayMove = short < 2;
  /** Parts this plan moved apart to make room (`spreadNeighbours`), with their new orders. */
  const moved = new Map<string, number>();
  /** The run that needed the move, and the orders the move left it. */
  let spread: { run: number; ords: number[] } | null = null;
  for (;;) {
    const placed: PlacedPart[] = [];
    let placeAgain = false;
    for (const [r, run] of plan.inserted.entries()) {
      const { after, before } = run;
      if (after === null || before === null) {
        // One neighbour (or none): `ordsBetween` always places the run from it — its ords counted from the
        // neighbour's as 0 are each part's offset — so each insert takes its neighbour's ord itself
        // (db/document-parts.ts `partInsert`, after any move of it): no read of the ords, and on a handle that runs
        // statements in its COMMIT's query none of the run's statements is a round trip of its own.
        const neighbour = after ?? before;
        const offsets = ordsBetween(after === null ? null : 0, before === null ? null : 0, run.parts.length)!;
        for (const [i, p] of run.parts.entries()) {
          placed.push(neighbour === null ? { ...p, ord: offsets[i]! } : { ...p, next: { to: neighbour, by: offsets[i]! } });
        }
        continue;
      }
      const lo = moved.get(after) ?? found.get(after)!;
      const hi = moved.get(before) ?? found.get(before)!;
      let ords = spread?.run === r ? spread.ords : ordsBetweenWithRoom(lo, hi, run.parts.length);
      if (!ords && spread === null && mayMove) {
        // Too close: a few neighbours on each side move apart (their rows keep their content and version).
        const made = await spreadNeighbours(sql, documentId, {
          after: { key: after, ord: lo },
          before: { key: before, ord: hi },
          n: run.parts.length,
          removed: plan.removed,
        });
        if (made) {
          for (const m of made.moved) moved.set(m.key, m.ord);
          spread = { run: r, ords: made.ords };
          ords = made.ords;
          // Runs placed before this one were placed between their neighbours' orders before the move.
          if (placed.some((p) => 'ord' in p)) {
            placeAgain = true;
            break;
          }
        }
      }
      // Still none (a second run of the plan short of room, or the table and this transaction's queued
      // writes cannot be read as one document): every part again.
      ords ??= ordsBetween(lo, hi, run.parts.length);
      if (!ords) return null;
      for (const [i, p] of run.parts.entries()) placed.push({ ...p, ord: ords[i]! });
    }
    if (!placeAgain) return placed;
  }
}
