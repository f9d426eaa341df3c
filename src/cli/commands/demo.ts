/** `combine demo` (the whole flow offline, against the simulator) and `combine sim` (the simulator alone). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import type * as SimModule from '../../sim/main.js';
import { connectHttp, toCliError } from '../client.js';
import { readDaemonPid, startDaemon, waitForExit } from '../daemon-control.js';
import { loadFollow } from '../common.js';
import { homeFiles } from '../home.js';
import { EXIT, plural } from '../output.js';
import { readProjectFile } from './project.js';
import { renderBacklog } from './info.js';
import { CliError } from '../../core/errors.js';
import { systemClock } from '../../core/clock.js';

async function loadSim(): Promise<typeof SimModule> {
  return (await import(new URL('./sim.js', import.meta.url).href)) as typeof SimModule;
}

async function runDemo(opts: { keep?: boolean; latency: string; json?: boolean }): Promise<void> {
  // With --json the narration is dropped and one summary object is printed at the end.
  const say = (line = ''): void => {
    if (!opts.json) process.stdout.write(`${line}\n`);
  };
  const { createSimulator } = await loadSim();
  const sim = await createSimulator({ latencyMs: Number(opts.latency) });
  const home = mkdtempSync(join(tmpdir(), 'combine-demo-'));
  const example = fileURLToPath(new URL('../examples/acme.json', import.meta.url));
  const started = systemClock.now();
  say('combine demo: the model is SIMULATED — a deterministic OpenAI-compatible server on');
  say(`${sim.url}; no API key is used and nothing leaves this machine.`);
  say(`state: ${home}`);
  say();
  const env = { ...process.env, COMBINE_HOME: home, OPENAI_BASE_URL: sim.url, OPENAI_API_KEY: 'simulated', COMBINE_MODEL: 'combine-sim' };
  try {
    await startDaemon(home, env);
    const { client } = connectHttp(homeFiles(home).socket);
    const imported = await client.project.import.mutate({ file: readProjectFile(example) });
    say(`$ combine project import examples/acme.json`);
    say(`${imported.result} project ${imported.project_id}: ${plural(imported.epics, 'epic')}`);
    say();
    say(`$ combine generate-all --project ${imported.project_id} --follow`);
    const r = await client.generate.all.mutate({ project_id: imported.project_id });
    say(`thread ${r.thread_id} ${r.status}`);
    const final = await (await loadFollow()).followThread(home, r.thread_id, { quiet: opts.json });
    say(`thread ${final.thread_id} ${final.status}`);
    say();
    say(`$ combine backlog ${imported.project_id}`);
    const backlog = await client.backlog.query({ project_id: imported.project_id });
    say(renderBacklog(backlog));
    say();
    const verify = await client.ledger.verify.query();
    say(`$ combine ledger verify`);
    say(verify.ok ? `ledger ok: ${plural(verify.entries, 'entry', 'entries')}, chain head ${verify.head_hash}` : 'ledger verification FAILED');
    say();
    say(`done in ${((systemClock.now() - started) / 1000).toFixed(1)}s; ${sim.calls.length} simulated provider calls.`);
    if (opts.json) {
      const summary = {
        simulated: true,
        project_id: imported.project_id,
        thread_id: final.thread_id,
        status: final.status,
        child_summary: final.child_summary,
        epics: backlog.epics.map((e) => ({ epic_id: e.epic_id, title: e.title, stories: e.stories.length })),
        ledger_ok: verify.ok,
        provider_calls: sim.calls.length,
        duration_ms: systemClock.now() - started,
      };
      process.stdout.write(`${JSON.stringify(summary)}\n`);
    }
    const pid = readDaemonPid(home);
    await client.daemon.stop.mutate();
    if (pid) await waitForExit(pid, 15_000);
  } catch (err) {
    throw toCliError(err);
  } finally {
    await sim.close();
    if (opts.keep) {
      say(`kept ${home}; explore it with e.g. COMBINE_HOME=${home} combine threads`);
    } else {
      rmSync(home, { recursive: true, force: true });
    }
  }
  say('With OPENAI_API_KEY (and OPENAI_BASE_URL for Ollama, vLLM or llama.cpp) the same commands use a real model.');
}

export function demoCommands(): Command[] {
  const demo = new Command('demo')
    .description('run the whole flow offline: simulator, temporary home, import, generate-all, backlog')
    .option('--keep', 'keep the temporary COMBINE_HOME to explore afterwards')
    .option('--latency <ms>', 'simulated model latency per call', '150')
    .option('--json', 'print one JSON summary instead of the narration')
    .addHelpText('after', '\nExamples:\n  combine demo\n  combine demo --keep        # then explore with the printed COMBINE_HOME\n  combine demo --json')
    .action(runDemo);

  const sim = new Command('sim')
    .description('run the offline OpenAI-compatible simulator in the foreground (point OPENAI_BASE_URL at it)')
    .option('--port <n>', 'port on 127.0.0.1 (0 = any free port)', '0')
    .option('--latency <ms>', 'delay before every answer', '0')
    .option('--fault-rate <share>', 'share of calls (0-1) that get a random transient fault', '0')
    .option('--seed <n>', 'seed for the fault sequence', '42')
    .addHelpText(
      'after',
      '\nExample:\n  combine sim --port 8787 --latency 300 --fault-rate 0.2 &\n  OPENAI_BASE_URL=http://127.0.0.1:8787/v1 combine generate-all --project acme --follow',
    )
    .action(async (o: { port: string; latency: string; faultRate: string; seed: string }) => {
      const nums = { port: Number(o.port), latency: Number(o.latency), faultRate: Number(o.faultRate), seed: Number(o.seed) };
      for (const [k, v] of Object.entries(nums)) if (!Number.isFinite(v) || v < 0) throw new CliError(`--${k}: "${v}" is not a number ≥ 0`, EXIT.USAGE);
      const { createSimulator } = await loadSim();
      const s = await createSimulator({ port: nums.port, latencyMs: nums.latency, faultRate: nums.faultRate, seed: nums.seed });
      process.stdout.write(`${JSON.stringify({ url: s.url, port: s.port })}\n`);
      const close = () => void s.close().then(() => process.exit(0));
      process.on('SIGTERM', close);
      process.on('SIGINT', close);
    });
  return [demo, sim];
}
