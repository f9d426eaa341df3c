/**
 * The logger everything is handed (pino's): the daemon makes it (daemon/logger.ts: the log file,
 * redaction, levels); the engine and the scheduler only write to it.
 */
import type pino from 'pino';

export type Logger = pino.Logger;
