/**
 * `npm run screenshots`: the README's dashboard pictures, taken from the demo data (examples/acme.json
 * against the simulator, offline) by the same headless Chromium the tests use. Writes
 * docs/screenshots/project.png, thread-ledger.png, operation.png and document.png.
 *
 * The scene: generate-all over the five epics, where the first answer for "checkout" breaks the schema
 * (so its ledger shows a repair), then one epic regenerated against a slow model, caught in flight;
 * the example operation (release_notes) run once, and its page showing an input the daemon refused.
 */
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createSimulator } from '../src/sim/simulator.js';
import { launchBrowser } from '../test/helpers/browser.js';

const ROOT = new URL('..', import.meta.url).pathname;
const OUT = join(ROOT, 'docs', 'screenshots');

/** The CLI, asynchronously: the simulator answers from this process's event loop meanwhile. */
async function cli(env: NodeJS.ProcessEnv, ...args: string[]): Promise<any> {
  const { stdout } = await promisify(execFile)(process.execPath, [join(ROOT, 'dist', 'cli.js'), ...args, '--json'], { env, encoding: 'utf8' });
  // One JSON document, or (with --follow) one per line: the last is the final state.
  return stdout.trimStart().startsWith('{\n') || stdout.trimStart().startsWith('[') ? JSON.parse(stdout) : JSON.parse(stdout.trim().split('\n').at(-1)!);
}

async function main(): Promise<void> {
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit' });
  const sim = await createSimulator({ latencyMs: 150, faults: [{ kind: 'schema_invalid', match: 'Epic id: checkout', times: 1 }] });
  const home = mkdtempSync(join(tmpdir(), 'combine-shots-'));
  const env = { ...process.env, COMBINE_HOME: home, OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'simulated', COMBINE_MODEL: 'combine-sim' };
  const browser = await launchBrowser();
  try {
    mkdirSync(join(home, 'operations'));
    copyFileSync(join(ROOT, 'examples', 'operations', 'release_notes.mjs'), join(home, 'operations', 'release_notes.mjs'));
    writeFileSync(
      join(home, 'config.json'),
      JSON.stringify({ prices: { 'combine-sim': { input_per_million_usd: 2.5, output_per_million_usd: 10 } }, retry: { base: '50ms', cap: '200ms' } }),
    );
    const { http } = await cli(env, 'daemon', 'start', '--http-port', '0');
    await cli(env, 'project', 'import', join(ROOT, 'examples', 'acme.json'));
    const all = await cli(env, 'generate-all', '--project', 'acme');
    await cli(env, 'thread', all.thread_id, '--follow');
    const notes = {
      project_id: 'acme',
      version: '2.4.0',
      changes: ['Faster checkout on mobile', 'Returns can be started from the order page', 'Fix: catalog search ignored accents'],
    };
    await cli(env, 'run', 'release_notes', '--input', JSON.stringify(notes), '--follow');
    const checkout = ((await cli(env, 'threads', '--project', 'acme')) as { thread_id: string; target_ref: { epic_id?: string } }[]).find(
      (t) => t.target_ref.epic_id === 'checkout',
    )!;
    sim.setFaults([{ kind: 'hang', match: 'Epic id: returns', hang_ms: 60_000 }]);
    await cli(env, 'generate-epic', '--project', 'acme', '--epic', 'returns', '--force');

    const token = readFileSync(join(home, 'http.token'), 'utf8').trim();
    const page = await browser.newPage({ viewport: { width: 1200, height: 760 } });
    await page.goto(`${http.url}?token=${encodeURIComponent(token)}`);
    mkdirSync(OUT, { recursive: true });
    await page.goto(`${http.url}projects/acme`);
    await page.locator('tr[data-epic="returns"]').getByText('Generation in progress').waitFor();
    await page.locator('tr[data-epic="catalog"] summary').click();
    await page.screenshot({ path: join(OUT, 'project.png'), fullPage: true });
    await page.goto(`${http.url}threads/${checkout.thread_id}`);
    await page.locator('.entry-error details summary').first().click();
    await page.screenshot({ path: join(OUT, 'thread-ledger.png'), fullPage: true });
    await page.goto(`${http.url}operations/release_notes?project_id=acme`);
    await page.locator('#run-input').fill(JSON.stringify({ ...notes, version: '2.5', changes: [] }, null, 2));
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.locator('.form-result li').first().waitFor();
    await page.screenshot({ path: join(OUT, 'operation.png'), fullPage: true });
    await page.goto(`${http.url}projects/acme/documents/release_notes?key=2.4.0`);
    await page.screenshot({ path: join(OUT, 'document.png'), fullPage: true });
    await cli(env, 'daemon', 'stop');
    console.log(`wrote ${['project', 'thread-ledger', 'operation', 'document'].map((n) => join(OUT, `${n}.png`)).join(', ')}`);
  } finally {
    await browser.close();
    await sim.close();
    rmSync(home, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
