/** A port option's value, as the CLI and the daemon's own entry (daemon/daemon-run.ts) both read it. */
import { CliError } from './errors.js';

/** Parses a port flag's value; `anyFree` allows 0 (the system picks a free port). A bad one is a usage error (exit 2). */
export function parsePort(value: string | undefined, flag = '--metrics-port', anyFree = false): number | null {
  if (value === undefined) return null;
  const port = Number(value);
  const min = anyFree ? 0 : 1;
  if (!/^\d+$/.test(value) || port < min || port > 65535) throw new CliError(`${flag}: "${value}" is not a port (${min}–65535)`, 2);
  return port;
}

/** `--metrics-port` and `--http-port` as `runDaemon` takes them: one not given is left out. */
export function daemonRunPorts(metrics: string | undefined, http: string | undefined): { metricsPort?: number; httpPort?: number } {
  const metricsPort = parsePort(metrics);
  const httpPort = parsePort(http, '--http-port', true);
  return { ...(metricsPort !== null ? { metricsPort } : {}), ...(httpPort !== null ? { httpPort } : {}) };
}
