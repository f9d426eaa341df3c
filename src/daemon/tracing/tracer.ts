/**
 * Spans of the pipeline — command → claim → call → apply — all in the trace of the command that
 * created the thread. Off by default: the no-op tracer only makes the span ids that log lines and the
 * provider's `traceparent` header carry. With `otel.endpoint` set, the OpenTelemetry SDK is loaded
 * (lazily: never on the path of a daemon that does not export) and spans go to an OTLP/HTTP collector.
 *
 * Times are the caller's (the injected clock), so a span says what the engine saw.
 */
import type { Logger } from '../../core/logger.js';
import { childContext, formatTraceparent, parseTraceparent } from '../../core/trace-context.js';
import type { Tracer } from './types.js';

/** Spans that go nowhere: only the ids are made (log lines and the provider's header still carry them). */
export const noTracer: Tracer = {
  exporting: false,
  start: (_name, parent) => ({ context: childContext(parent), end() {} }),
  shutdown: async () => {},
};

/** The tracer a daemon with this `otel` config uses: the SDK's when an endpoint is set, else none. */
export async function createTracer(otel: { endpoint: string | null; serviceName: string }, version: string, logger: Logger): Promise<Tracer> {
  if (otel.endpoint === null) return noTracer;
  const { createOtlpTracer } = await import('./otel.js');
  return createOtlpTracer({ endpoint: otel.endpoint, serviceName: otel.serviceName, version, logger });
}

/**
 * Runs a command inside its span: the caller's `traceparent` (if valid) is the parent, and `fn` gets
 * the command span's own context — what the new thread stores.
 */
export async function traceCommand<T>(
  tracer: Tracer,
  clock: { now(): number },
  operation: string,
  callerTraceparent: string | null,
  fn: (traceparent: string) => Promise<T>,
): Promise<T> {
  const span = tracer.start(`command ${operation}`, parseTraceparent(callerTraceparent), {
    kind: 'server',
    startMs: clock.now(),
    attributes: { 'combine.operation': operation },
  });
  try {
    const result = await fn(formatTraceparent(span.context));
    span.end(clock.now());
    return result;
  } catch (err) {
    span.end(clock.now(), (err as Error).message);
    throw err;
  }
}
