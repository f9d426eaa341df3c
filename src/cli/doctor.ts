/**
 * `combine doctor`: is this machine ready to do paid work? Checks what a user needs to work, each an
 * ok / warn / fail line with what to do: the configuration, the provider (endpoint answers, key
 * accepted, model offered by `GET /models`; structured output only with --live, which costs one small
 * call), the home directory's permissions, the disk space, and the daemon. Loaded only by `doctor`.
 */
import { accessSync, constants, existsSync, statfsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { loadConfig, type DaemonConfig } from '../daemon/config/config.js';
import { connectHttp, probeSocket } from './client.js';
import { homeFiles } from './home.js';
import { color, statusColor } from './output.js';

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface Check {
  name: string;
  status: CheckStatus;
  message: string;
  /** What to do about a warn or fail. */
  fix: string | null;
}

const PROVIDER_TIMEOUT_MS = 10_000;
const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

const check = (name: string, status: CheckStatus, message: string, fix: string | null = null): Check => ({ name, status, message, fix });

function configCheck(home: string, env: NodeJS.ProcessEnv): { check: Check; config: DaemonConfig | null } {
  const file = join(home, 'config.json');
  try {
    const config = loadConfig(home, env);
    return { config, check: check('config', 'ok', existsSync(file) ? `${file} is valid` : 'no config.json: defaults and environment') };
  } catch (err) {
    return { config: null, check: check('config', 'fail', (err as Error).message, `fix the field named above in ${file} (every key is in the README)`) };
  }
}

interface ModelsAnswer {
  status: number | null;
  models: string[] | null;
  error: string | null;
  ms: number;
}

async function getModels(config: DaemonConfig): Promise<ModelsAnswer> {
  const started = performance.now();
  const headers: Record<string, string> = config.provider.apiKey ? { authorization: `Bearer ${config.provider.apiKey}` } : {};
  try {
    const res = await fetch(`${config.provider.baseURL.replace(/\/$/, '')}/models`, { headers, signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS) });
    const body = (await res.json().catch(() => null)) as { data?: { id?: unknown }[] } | null;
    const models = res.ok && Array.isArray(body?.data) ? body.data.map((m) => String(m.id)) : null;
    return { status: res.status, models, error: null, ms: performance.now() - started };
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const error =
      (err as Error).name === 'TimeoutError' ? `no answer within ${PROVIDER_TIMEOUT_MS / 1000}s` : (cause?.code ?? cause?.message ?? (err as Error).message);
    return { status: null, models: null, error, ms: performance.now() - started };
  }
}

function providerChecks(config: DaemonConfig, m: ModelsAnswer): Check[] {
  const url = config.provider.baseURL;
  const key = config.provider.apiKey;
  const needsKey = /(^|\.)openai\.com$/.test(new URL(url).hostname);
  if (m.status === null) {
    return [
      check(
        'provider endpoint',
        'fail',
        `cannot reach ${url}: ${m.error}`,
        'start the server, or point OPENAI_BASE_URL (or provider.base_url) at one that runs',
      ),
    ];
  }
  const answered = check(
    'provider endpoint',
    m.status >= 500 ? 'warn' : 'ok',
    `${url} answers (GET /models: HTTP ${m.status}, ${Math.round(m.ms)} ms)`,
    m.status >= 500 ? 'the provider reports an error of its own; try again later' : null,
  );
  let keyCheck: Check;
  if (m.status === 401 || m.status === 403)
    keyCheck = check(
      'api key',
      'fail',
      `${key ? 'OPENAI_API_KEY was rejected' : 'the endpoint wants a key and none is set'} (HTTP ${m.status})`,
      'set OPENAI_API_KEY to a valid key for this endpoint',
    );
  else if (!key)
    keyCheck = needsKey
      ? check('api key', 'fail', 'OPENAI_API_KEY is not set', 'export OPENAI_API_KEY=… (or try `combine demo`, which needs none)')
      : check('api key', 'ok', 'none set; this endpoint answered without one');
  else if (m.models !== null) keyCheck = check('api key', 'ok', 'accepted');
  else keyCheck = check('api key', 'warn', `not checked: GET /models answered HTTP ${m.status}`, '`combine doctor --live` checks it with one small call');
  const model = config.provider.model;
  let modelCheck: Check;
  if (m.models === null)
    modelCheck = check(
      'model',
      'warn',
      `${model}: not checked (the endpoint does not list its models)`,
      '`combine doctor --live` checks it with one small call',
    );
  else if (m.models.includes(model)) modelCheck = check('model', 'ok', `${model} is offered`);
  else {
    const offered = m.models.slice(0, 8).join(', ') + (m.models.length > 8 ? `, … (${m.models.length})` : '');
    modelCheck = check(
      'model',
      'fail',
      `${model} is not offered by ${url} (it offers: ${offered || 'none'})`,
      'set COMBINE_MODEL (or provider.model in config.json) to one it offers',
    );
  }
  return [answered, keyCheck, modelCheck];
}

/** The one paid call of --live: a tiny answer in a JSON schema, as the engine asks for its answers. */
async function structuredOutputCheck(config: DaemonConfig): Promise<Check> {
  const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
  const body = {
    model: config.provider.model,
    messages: [{ role: 'user', content: 'Answer with the JSON object {"ok": true} and nothing else.' }],
    response_format: { type: 'json_schema', json_schema: { name: 'combine_doctor', strict: true, schema } },
    max_tokens: 20,
    temperature: 0,
  };
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    ...(config.provider.apiKey ? { authorization: `Bearer ${config.provider.apiKey}` } : {}),
  };
  try {
    const res = await fetch(`${config.provider.baseURL.replace(/\/$/, '')}/chat/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(config.provider.callTimeoutMs),
    });
    const answer = (await res.json().catch(() => null)) as {
      choices?: { message?: { content?: string } }[];
      error?: { message?: string };
      usage?: { total_tokens?: number };
    } | null;
    if (!res.ok) {
      // Providers echo a rejected key in their message: it never reaches the output.
      const said = (answer?.error?.message ?? 'no message').split(config.provider.apiKey ?? '\0').join('[redacted]');
      const fix =
        res.status === 401 || res.status === 403
          ? 'set OPENAI_API_KEY to a valid key for this endpoint'
          : 'use a model and endpoint that support response_format json_schema';
      return check('structured output', 'fail', `the call was refused (HTTP ${res.status}): ${said}`, fix);
    }
    const tokens = answer?.usage?.total_tokens;
    const cost = `1 call${tokens !== undefined ? `, ${tokens} tokens` : ''}`;
    let parsed: unknown;
    try {
      parsed = JSON.parse(answer?.choices?.[0]?.message?.content ?? '');
    } catch {
      return check('structured output', 'fail', `the answer is not JSON (${cost})`, 'use a model that supports structured outputs (JSON schema)');
    }
    if (parsed && typeof parsed === 'object' && typeof (parsed as { ok?: unknown }).ok === 'boolean')
      return check('structured output', 'ok', `answered in the requested JSON schema (${cost})`);
    return check(
      'structured output',
      'warn',
      `answered JSON, but not in the requested shape (${cost}): the endpoint may ignore json_schema`,
      'answers are still validated and repaired once; a model with structured outputs wastes fewer calls',
    );
  } catch (err) {
    return check('structured output', 'fail', `the call failed: ${(err as Error).message}`, 'see the provider checks above');
  }
}

function homeCheck(home: string): Check {
  if (!existsSync(home)) return check('home', 'ok', `${home} does not exist yet; it is created (0700) on first use`);
  const st = statSync(home);
  try {
    accessSync(home, constants.W_OK);
  } catch {
    return check('home', 'fail', `${home} is not writable by this user`, `chown $USER ${home} (or set COMBINE_HOME to a directory you own)`);
  }
  if (typeof process.getuid === 'function' && st.uid !== process.getuid())
    return check('home', 'warn', `${home} belongs to another user (uid ${st.uid})`, `chown $USER ${home}`);
  // A private directory protects what is inside it (the database, config.json, daemon.env).
  if ((st.mode & 0o077) !== 0) {
    const mode = (st.mode & 0o777).toString(8).padStart(4, '0');
    return check('home', 'warn', `${home} can be read by other users (mode ${mode}): the ledger holds every prompt and answer`, `chmod 700 ${home}`);
  }
  return check('home', 'ok', `${home} is private (0700) and writable`);
}

function diskCheck(home: string): Check {
  let dir = home;
  while (!existsSync(dir) && dirname(dir) !== dir) dir = dirname(dir);
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  const text = free >= GiB ? `${(free / GiB).toFixed(1)} GiB free` : `${Math.round(free / MiB)} MiB free`;
  if (free < 100 * MiB) return check('disk', 'fail', `${text} at ${dir}: a full disk stops every write`, 'free space, or `combine prune --older-than 30d`');
  if (free < GiB) return check('disk', 'warn', `${text} at ${dir}`, 'free space, or `combine prune --older-than 30d`');
  return check('disk', 'ok', `${text} at ${dir}`);
}

async function daemonCheck(home: string): Promise<Check> {
  const files = homeFiles(home);
  if (!(await probeSocket(files.socket))) return check('daemon', 'ok', 'not running; commands start it when needed (or: combine daemon start)');
  try {
    const { client } = connectHttp(files.socket);
    const signal = AbortSignal.timeout(5000);
    const [status, health] = await Promise.all([client.daemon.status.query(undefined, { signal }), client.health.query(undefined, { signal })]);
    const open = Object.entries(health.breakers).filter(([, b]) => b.state === 'open');
    if (open.length > 0) {
      const [endpoint, b] = open[0]!;
      return check(
        'daemon',
        'warn',
        `running (pid ${status.pid}); the breaker for ${endpoint} is open after ${b.consecutive_failures} failures, no calls until ${b.open_until}`,
        'see the provider checks above; calls resume by themselves when it answers',
      );
    }
    if (!health.ready) {
      const failing = Object.entries(health.checks)
        .filter(([, v]) => !v)
        .map(([k]) => k);
      return check('daemon', 'fail', `running (pid ${status.pid}) but not ready: ${failing.join(', ')}`, 'see `combine health` and `combine logs -n 50`');
    }
    return check('daemon', 'ok', `running (pid ${status.pid}, version ${status.version}) and ready`);
  } catch (err) {
    return check(
      'daemon',
      'fail',
      `the socket accepts connections but the daemon does not answer: ${(err as Error).message}`,
      'see `combine logs -n 50`; `combine daemon stop` and start it again',
    );
  }
}

/** Runs every check; the provider ones only when the configuration loads. */
export async function runDoctor(home: string, env: NodeJS.ProcessEnv, live: boolean): Promise<Check[]> {
  const { check: cfg, config } = configCheck(home, env);
  const checks: Check[] = [cfg];
  if (config) {
    const models = await getModels(config);
    checks.push(...providerChecks(config, models));
    if (!live) checks.push(check('structured output', 'skip', 'not checked: `combine doctor --live` checks it with one small call (it costs a call)'));
    else if (models.status === null) checks.push(check('structured output', 'skip', 'not checked: the endpoint cannot be reached'));
    else checks.push(await structuredOutputCheck(config));
  } else {
    checks.push(check('provider', 'skip', 'not checked: the configuration does not load'));
  }
  checks.push(homeCheck(home), diskCheck(home), await daemonCheck(home));
  return checks;
}

/** One line per check (and what to do under a warn or fail), then the verdict. */
export function renderDoctor(checks: Check[], live: boolean): string {
  const c = color();
  const lines = live ? [c.dim('--live: one small provider call was made (it costs a call)'), ''] : [];
  const width = Math.max(...checks.map((k) => k.name.length));
  for (const k of checks) {
    lines.push(`${statusColor(k.status)(k.status.padEnd(4))}  ${k.name.padEnd(width)}  ${k.message}`);
    if (k.fix && (k.status === 'warn' || k.status === 'fail')) lines.push(`      ${' '.repeat(width)}  ${c.dim('→')} ${k.fix}`);
  }
  const failed = checks.filter((k) => k.status === 'fail').length;
  const warned = checks.filter((k) => k.status === 'warn').length;
  lines.push(
    '',
    failed > 0
      ? c.red(`${failed} check${failed === 1 ? '' : 's'} failed`)
      : warned > 0
        ? c.yellow(`ready, with ${warned} warning${warned === 1 ? '' : 's'}`)
        : c.green('ready'),
  );
  return lines.join('\n');
}
