/**
 * The OpenTelemetry SDK behind the Tracer interface: a BasicTracerProvider whose batch processor sends
 * spans over OTLP/HTTP (JSON) to `otel.endpoint`. Loaded only when that is set (tracer.ts). A collector
 * that is down never slows the engine: the batch processor drops what it cannot send, and export
 * failures are logged as warnings, at most one a minute.
 */
import { context, diag, DiagLogLevel, ROOT_CONTEXT, SpanKind as OtelSpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Logger } from '../../core/logger.js';
import type { TraceContext } from '../../core/trace-context.js';
import type { SpanKind, Tracer } from './types.js';

const KINDS: Record<SpanKind, OtelSpanKind> = { server: OtelSpanKind.SERVER, client: OtelSpanKind.CLIENT, internal: OtelSpanKind.INTERNAL };

/** `http://host:4318` → `http://host:4318/v1/traces`; a URL that already names a path is used as is. */
export function tracesUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (url.pathname === '/' || url.pathname === '') url.pathname = '/v1/traces';
  return url.toString();
}

export function createOtlpTracer(o: { endpoint: string; serviceName: string; version: string; logger: Logger }): Tracer {
  let lastWarning = 0;
  diag.setLogger(
    {
      error: (message: string) => {
        // A monotonic clock is enough to space warnings out; nothing here is business time.
        if (lastWarning > 0 && performance.now() - lastWarning < 60_000) return;
        lastWarning = performance.now();
        o.logger.warn({ component: 'otel', endpoint: o.endpoint, error: message }, 'span export failed; spans are dropped until the collector answers');
      },
      warn: () => {},
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    DiagLogLevel.ERROR,
  );
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': o.serviceName, 'service.version': o.version }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: tracesUrl(o.endpoint) }), { scheduledDelayMillis: 500 })],
  });
  const tracer = provider.getTracer('combine', o.version);
  const parentContext = (parent: TraceContext | null) =>
    parent === null
      ? ROOT_CONTEXT
      : trace.setSpanContext(context.active(), { traceId: parent.traceId, spanId: parent.spanId, traceFlags: parent.flags, isRemote: true });
  return {
    exporting: true,
    start(name, parent, s) {
      const span = tracer.startSpan(
        name,
        { kind: KINDS[s.kind], startTime: s.startMs, ...(s.attributes ? { attributes: s.attributes } : {}) },
        parentContext(parent),
      );
      const c = span.spanContext();
      return {
        context: { traceId: c.traceId, spanId: c.spanId, flags: c.traceFlags },
        end(endMs, error) {
          if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
          span.end(Math.max(endMs, s.startMs));
        },
      };
    },
    async shutdown() {
      await provider.shutdown().catch(() => {});
    },
  };
}
