/**
 * The operations this daemon runs (built-ins and the home's modules) and an operation's page: what it
 * does, its model and retry, its input schema, and a form to run it — a JSON input sent to
 * `POST /commands/run/{operation}`, the same service as `combine run`, so the daemon validates it and
 * the page shows the fields it names.
 */
import type { Services } from '../../daemon/services/index.js';
import { html, prettyJson, type Html } from '../html.js';

const schemaText = (schema: unknown) => prettyJson(schema, 50_000, 'GET /operations/{operation}');

/** `?project_id=` carried from a project's page, so the form starts with that project. */
function projectOf(query: URLSearchParams): string | null {
  const p = query.get('project_id');
  return p && p.length <= 200 ? p : null;
}

export function operationsPage(services: Services, query: URLSearchParams): { title: string; body: Html } {
  const projectId = projectOf(query);
  const suffix = projectId ? `?project_id=${encodeURIComponent(projectId)}` : '';
  const body = html`<h1>Operations</h1>
<p class="muted">Each operation is a definition: built in, or a module in <code>COMBINE_HOME/operations/</code>. Open one to see its input and run it${
    projectId ? html` for <code>${projectId}</code>` : ''
  }.</p>
<table class="operations">
<thead><tr><th>Operation</th><th>Description</th><th>Source</th><th>Model</th></tr></thead>
<tbody>${services.threads
    .operations()
    .map(
      (o) =>
        html`<tr data-operation="${o.name}"><td><a href="/operations/${encodeURIComponent(o.name)}${suffix}"><code>${o.name}</code></a></td><td>${o.description}</td><td><code>${o.source}</code></td><td>${o.model}</td></tr>`,
    )}</tbody>
</table>`;
  return { title: 'Operations', body };
}

type JsonSchema = { type?: unknown; properties?: Record<string, { type?: unknown; default?: unknown }>; required?: unknown };

/** A starting input from the schema: its required fields, each with its default or an empty value of its type. */
function inputTemplate(schema: unknown, projectId: string | null): Record<string, unknown> {
  const s = (schema ?? {}) as JsonSchema;
  const required = Array.isArray(s.required) ? (s.required as string[]) : [];
  const out: Record<string, unknown> = {};
  for (const name of required) {
    const p = s.properties?.[name] ?? {};
    const type = Array.isArray(p.type) ? p.type[0] : p.type;
    if (p.default !== undefined) out[name] = p.default;
    else if (name === 'project_id' && projectId) out[name] = projectId;
    else out[name] = type === 'array' ? [] : type === 'object' ? {} : type === 'integer' || type === 'number' ? 0 : type === 'boolean' ? false : '';
  }
  return out;
}

export async function operationPage(services: Services, name: string, query: URLSearchParams): Promise<{ title: string; body: Html; live: false }> {
  const op = await services.threads.operation(name);
  const template = JSON.stringify(inputTemplate(op.input, projectOf(query)), null, 2);
  const body = html`<p class="crumbs"><a href="/operations">Operations</a> /</p>
<h1><code>${op.name}</code></h1>
<p>${op.description}</p>
<dl class="facts">
  <dt>Source</dt><dd><code>${op.source}</code></dd>
  <dt>Role</dt><dd>${op.role === 'orchestration' ? html`orchestration: one <a href="/operations/${encodeURIComponent(op.child ?? '')}"><code>${op.child}</code></a> thread per child input` : 'one model call per request'}</dd>
  <dt>Model</dt><dd>${op.model}${op.provider_model ? html` → <code>${op.provider_model}</code>` : ''}</dd>
  <dt>Priority</dt><dd>${op.priority}</dd>
  <dt>Retry</dt><dd>${op.retry.max_attempts} attempts, backoff ${op.retry.base_ms}–${op.retry.cap_ms} ms, ${op.retry.repair_attempts} repair attempts</dd>
  <dt>Identity</dt><dd><code>${op.identity}</code> — an identical request returns the same thread</dd>
</dl>
<h2>Run</h2>
<form class="run" data-run="/commands/run/${encodeURIComponent(op.name)}">
  <label for="run-input">Input (JSON, checked by the input schema below)</label>
  <textarea id="run-input" name="input" rows="${Math.min(20, template.split('\n').length + 3)}" spellcheck="false">${template}</textarea>
  <label class="check"><input type="checkbox" name="force"> Run again even if an identical request already completed (a new paid call)</label>
  <div><button type="submit" class="primary">Run</button></div>
  <div class="form-result" role="alert" hidden></div>
</form>
<h2>Input schema</h2>
<pre class="document" data-testid="input-schema">${schemaText(op.input)}</pre>
${op.output ? html`<details><summary>Output schema (the model's answer)</summary><pre class="document">${schemaText(op.output)}</pre></details>` : ''}
${op.rules ? html`<details><summary>Validation rules</summary><pre class="document">${schemaText(op.rules)}</pre></details>` : ''}`;
  return { title: op.name, body, live: false };
}
