/**
 * The engine's spans, each a child of the command span whose context the thread stores: `claim` (the
 * lease, with its reservation), `call` (the provider call; its id is the `traceparent` header the
 * provider receives) and `apply` (validation and the mutation). Claim and apply spans are made only
 * while spans are exported; the call's context is always made, because the provider gets the header.
 */
import type { ModelRoute } from '../routing/router.js';
import { formatTraceparent, parseTraceparent } from '../../core/trace-context.js';
import type { SpanAttributes, Tracer } from './types.js';

export interface CallSpan {
  /** The `traceparent` header of the call. */
  header: string;
  end(endMs: number, error?: string): void;
}

export class EngineSpans {
  constructor(private readonly tracer: Tracer) {}

  /** A claim round's items, each leased between `startMs` and `endMs`. */
  claimed(items: readonly { item: { id: string; thread_id: string }; route: ModelRoute; traceparent: string | null }[], startMs: number, endMs: number): void {
    if (!this.tracer.exporting) return;
    for (const c of items) {
      this.tracer
        .start('claim', parseTraceparent(c.traceparent), {
          kind: 'internal',
          startMs,
          attributes: { ...ids(c.item), 'combine.model.logical': c.route.logical },
        })
        .end(endMs);
    }
  }

  call(traceparent: string | null, item: { id: string; thread_id: string }, route: ModelRoute, startMs: number): CallSpan {
    const attributes: SpanAttributes = {
      ...ids(item),
      'gen_ai.request.model': route.model,
      'combine.model.logical': route.logical,
      'combine.endpoint': route.endpoint.label,
    };
    const span = this.tracer.start('call', parseTraceparent(traceparent), { kind: 'client', startMs, attributes });
    return { header: formatTraceparent(span.context), end: (endMs, error) => span.end(endMs, error) };
  }

  /** Validation and mutation of a recorded answer, ending as `outcome` (applied, repair, dead_letter …). */
  applied(traceparent: string | null, item: { id: string; thread_id: string }, startMs: number, endMs: number, outcome: string): void {
    if (!this.tracer.exporting) return;
    const span = this.tracer.start('apply', parseTraceparent(traceparent), {
      kind: 'internal',
      startMs,
      attributes: { ...ids(item), 'combine.outcome': outcome },
    });
    span.end(endMs, outcome === 'applied' ? undefined : outcome);
  }
}

function ids(item: { id: string; thread_id: string }): SpanAttributes {
  return { 'combine.thread_id': item.thread_id, 'combine.work_item_id': item.id };
}
