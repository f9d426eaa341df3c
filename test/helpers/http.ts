/**
 * A plain HTTP client for the daemon's HTTP API (node:http, so any header — Host included — is sent as
 * given), and starting the daemon of a Harness with HTTP on a free port.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import type { Harness } from './harness.js';

export interface HttpAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: any;
}

export interface HttpDaemon {
  port: number;
  token: string;
  /** A request with the token (unless `headers.authorization` is given, or `token: null`). */
  request(
    method: string,
    path: string,
    o?: { headers?: Record<string, string>; body?: unknown; raw?: string | Buffer; token?: string | null },
  ): Promise<HttpAnswer>;
}

export function httpRequest(port: number, method: string, path: string, headers: Record<string, string>, body?: string | Buffer): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          // not JSON (a page, or nothing)
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    // The server may answer (413) and close before the whole body is sent: a reset after the answer is
    // fine, a connection that closes with no answer at all is an error (not a test that hangs).
    let answered = false;
    req.on('response', () => {
      answered = true;
    });
    req.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' || err.code === 'ECONNRESET' ? undefined : reject(err)));
    req.on('close', () => {
      if (!answered) reject(new Error(`${method} ${path}: the connection closed with no answer`));
    });
    req.end(body);
  });
}

/** `combine daemon start --http-port 0`: the daemon of `h`, serving HTTP on a free port. */
export async function startHttpDaemon(h: Harness, env: NodeJS.ProcessEnv = {}): Promise<HttpDaemon> {
  const r = await h.cli(['daemon', 'start', '--http-port', '0', '--json'], { env });
  if (r.code !== 0) throw new Error(`daemon start failed: ${r.stderr}`);
  const port = (JSON.parse(r.stdout) as { http: { port: number } | null }).http?.port;
  if (!port) throw new Error(`the daemon reports no HTTP port: ${r.stdout}`);
  const token = readFileSync(join(h.home, 'http.token'), 'utf8').trim();
  return {
    port,
    token,
    request(method, path, o = {}) {
      const headers: Record<string, string> = { ...(o.token === null ? {} : { authorization: `Bearer ${o.token ?? token}` }), ...o.headers };
      let body: string | Buffer | undefined = o.raw;
      if (o.body !== undefined) {
        body = JSON.stringify(o.body);
        headers['content-type'] ??= 'application/json';
      }
      if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
      return httpRequest(port, method, path, headers, body);
    },
  };
}
