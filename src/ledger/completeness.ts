/**
 * Completeness of each work item's record, read from the ledger in chain order (pure: entries in,
 * holes out). A complete record answers every prompt with a response or an error before the next
 * prompt, and applies a mutation only after an answer was recorded for that work item.
 */

export interface CompletenessEntry {
  seq: number;
  thread_id: string;
  work_item_id: string | null;
  entry_type: string;
}

export interface IncompleteRecord {
  /** The entry that shows the hole (null when the hole is the absence of any entry). */
  seq: number | null;
  thread_id: string;
  work_item_id: string | null;
  reason: string;
}

export const REASON_UNANSWERED_PROMPT = 'a prompt has no response or error';

export class CompletenessTracker {
  /** Work item → its prompt that has no response or error yet. */
  private readonly openPrompts = new Map<string, CompletenessEntry>();
  /** Work items with at least one recorded response. */
  private readonly answered = new Set<string>();
  private readonly found: IncompleteRecord[] = [];

  observe(e: CompletenessEntry): void {
    const id = e.work_item_id;
    if (id === null) return;
    switch (e.entry_type) {
      case 'prompt': {
        // A new prompt while the last one is unanswered: the earlier call's outcome was never recorded.
        const open = this.openPrompts.get(id);
        if (open)
          this.found.push({ seq: open.seq, thread_id: open.thread_id, work_item_id: id, reason: `${REASON_UNANSWERED_PROMPT} (entry ${e.seq} asked again)` });
        this.openPrompts.set(id, e);
        break;
      }
      case 'response':
        this.openPrompts.delete(id);
        this.answered.add(id);
        break;
      case 'error':
        this.openPrompts.delete(id);
        break;
      case 'mutation_report':
        if (!this.answered.has(id))
          this.found.push({ seq: e.seq, thread_id: e.thread_id, work_item_id: id, reason: 'a mutation_report with no recorded response before it' });
        break;
    }
  }

  /** Work items whose prompt is still unanswered: `finish` asks whether each is in flight. */
  startedWithoutAnswer(): string[] {
    return [...this.openPrompts.keys()];
  }

  /**
   * The holes found, in chain order. A prompt still unanswered at the end is a hole unless its call is
   * in flight now (`inFlight`).
   */
  finish(inFlight: (workItemId: string) => boolean): IncompleteRecord[] {
    for (const [id, open] of this.openPrompts) {
      if (!inFlight(id)) this.found.push({ seq: open.seq, thread_id: open.thread_id, work_item_id: id, reason: REASON_UNANSWERED_PROMPT });
    }
    return this.found.sort((a, b) => (a.seq ?? Infinity) - (b.seq ?? Infinity));
  }
}
