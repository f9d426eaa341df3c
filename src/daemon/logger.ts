/**
 * pino JSON logs to COMBINE_HOME/daemon.log. Secrets never reach the log: the API key is not passed to
 * any log call, and the redaction paths below catch keys and Authorization headers that an error object
 * might carry (the SDK's request options, HTTP headers).
 */
import pino from 'pino';

export type Logger = pino.Logger;

export const REDACT_PATHS = [
  'apiKey',
  'api_key',
  '*.apiKey',
  '*.api_key',
  'authorization',
  'Authorization',
  '*.authorization',
  '*.Authorization',
  'headers.authorization',
  '*.headers.authorization',
  'err.headers.authorization',
  'err.request.headers.authorization',
  'err.headers["x-api-key"]',
  'headers["x-api-key"]',
];

export function createLogger(destination: string | null, level = 'info'): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { pid: process.pid },
    // The spec's shape: {"level":"info","ts":"<ISO time>",...}; `combine logs` renders it readably.
    timestamp: () => `,"ts":"${new Date().toISOString()}"`,
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  if (destination === null) return pino(options, pino.destination(1));
  // Synchronous writes: a line logged just before a crash is on disk, not in a lost buffer.
  return pino(options, pino.destination({ dest: destination, mkdir: true, sync: true }));
}
