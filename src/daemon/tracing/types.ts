/** The tracer's shape: what the engine and the services call, whether spans are exported or not (tracer.ts, otel.ts). */
import type { TraceContext } from '../../core/trace-context.js';

export type SpanKind = 'server' | 'client' | 'internal';
export type SpanAttributes = Record<string, string | number | boolean>;

export interface SpanHandle {
  /** This span's context: what its children and the outgoing `traceparent` header carry. */
  readonly context: TraceContext;
  /** Ends the span at `endMs`; `error` marks it failed with that message. */
  end(endMs: number, error?: string): void;
}

export interface Tracer {
  /** True when spans leave the process (OTLP export is on). */
  readonly exporting: boolean;
  start(name: string, parent: TraceContext | null, o: { kind: SpanKind; startMs: number; attributes?: SpanAttributes }): SpanHandle;
  /** Sends what is buffered; called at shutdown. */
  shutdown(): Promise<void>;
}
