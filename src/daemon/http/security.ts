/**
 * The security of a web server on the user's own machine, which their browser shares with hostile pages:
 *
 * - a random token in `COMBINE_HOME/http.token` (0600, made at the first start): every request needs it,
 *   as `Authorization: Bearer <token>` or as the cookie a browser gets by opening `/?token=<token>`
 *   once (HttpOnly, so page scripts cannot read it; SameSite=Strict, so other sites' requests carry none);
 * - the `Host` header must name this server (`127.0.0.1:<port>` or `localhost:<port>`): a DNS-rebinding
 *   page, whose requests carry its own host name, is refused;
 * - a state-changing request whose `Origin` is another site is refused (CSRF);
 * - no CORS header is ever sent, so no other origin can read an answer.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { HttpProblem } from '../../core/errors.js';

export const TOKEN_FILE = 'http.token';
export const COOKIE_NAME = 'combine_token';

export function tokenPath(home: string): string {
  return join(home, TOKEN_FILE);
}

/** The token, made (0600) if the home has none yet. A file with looser bits is tightened. */
export function ensureHttpToken(home: string): string {
  const path = tokenPath(home);
  try {
    writeFileSync(path, `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    if (statSync(path).mode & 0o077) chmodSync(path, 0o600);
  }
  const token = readFileSync(path, 'utf8').trim();
  if (token.length < 16) throw new Error(`${path} holds no usable token (delete it to have a new one made)`);
  return token;
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Constant-time comparison (of digests, so lengths do not leak either). */
function sameToken(given: string, token: string): boolean {
  return timingSafeEqual(digest(given), digest(token));
}

function cookie(req: IncomingMessage, name: string): string | null {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return null;
}

const SAFE_METHODS = new Set(['GET', 'HEAD']);

export class RequestGuard {
  private readonly origins: Set<string>;
  private readonly hosts: Set<string>;

  constructor(
    private readonly token: string,
    private readonly port: number,
  ) {
    this.hosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`]);
    this.origins = new Set([...this.hosts].map((h) => `http://${h}`));
  }

  /** Host first (403), then Origin for state-changing requests (403). */
  checkSite(req: IncomingMessage): void {
    const host = (req.headers.host ?? '').toLowerCase();
    if (!this.hosts.has(host)) {
      throw new HttpProblem(403, 'FORBIDDEN', `Host "${host}" is not this server: use http://127.0.0.1:${this.port}/`);
    }
    const origin = req.headers.origin;
    if (!SAFE_METHODS.has(req.method ?? 'GET') && origin !== undefined && !this.origins.has(origin.toLowerCase())) {
      throw new HttpProblem(403, 'FORBIDDEN', `a ${req.method} request from origin "${origin}" is refused (cross-site request)`);
    }
  }

  /** True for the token as a Bearer header or as the dashboard's cookie. */
  isAuthenticated(req: IncomingMessage): boolean {
    const auth = req.headers.authorization;
    if (auth !== undefined) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
      return m !== null && sameToken(m[1]!, this.token);
    }
    const c = cookie(req, COOKIE_NAME);
    return c !== null && sameToken(c, this.token);
  }

  /** `?token=` on a page URL: true if it is the token (the caller sets the cookie and redirects). */
  acceptsUrlToken(given: string): boolean {
    return sameToken(given, this.token);
  }

  sessionCookie(): string {
    return `${COOKIE_NAME}=${encodeURIComponent(this.token)}; HttpOnly; SameSite=Strict; Path=/`;
  }
}
