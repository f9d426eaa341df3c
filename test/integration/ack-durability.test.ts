/**
 * An acknowledged command is on disk: commands are sent in bursts over the socket (so group commit
 * batches them), the daemon is SIGKILLed the moment the first answer of a burst arrives, and after a
 * restart every command that was answered is there, with its work item. Commands still unanswered at
 * the kill may or may not have been stored; none is half-stored.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { connectHttp } from '../../src/cli/client.js';
import { Harness, project, waitForExit } from '../helpers/harness.js';

let h: Harness;
afterEach(() => h?.cleanup());

const ROUNDS = 5;
const BURST = 60;

describe('durable acknowledgements', () => {
  it('every acked command survives a SIGKILL right after its ack', async () => {
    h = await Harness.start({ faults: [{ kind: 'hang' }] }); // calls never finish: threads stay active
    h.writeConfig({ engine: { max_in_flight: 1 } });
    await h.importProject(project('p', ROUNDS * BURST));
    const acked: { thread_id: string; epic: string }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const pid = h.daemonPid() ?? (await h.startDaemon());
      const { client } = connectHttp(`${h.home}/combine.sock`);
      let killed = false;
      const burst = Array.from({ length: BURST }, (_, i) => {
        const epic = `E${round * BURST + i + 1}`;
        return client.generate.epic.mutate({ project_id: 'p', epic_id: epic }).then(
          (r) => {
            acked.push({ thread_id: r.thread_id, epic });
            if (!killed) {
              killed = true;
              process.kill(pid, 'SIGKILL'); // right after the first ack, others still in flight
            }
          },
          () => undefined, // cut off by the kill: no promise was made
        );
      });
      await Promise.all(burst);
      await waitForExit(pid);
      expect(killed).toBe(true);
      await h.startDaemon();
    }
    expect(acked.length).toBeGreaterThanOrEqual(ROUNDS);

    for (const a of acked) {
      const row = await h.queryOne<{ status: string; target_ref: string }>('SELECT status, target_ref FROM llm_threads WHERE id = ?', [a.thread_id]);
      expect(row, `acked thread ${a.thread_id} (${a.epic}) is missing after the kill`).toBeDefined();
      expect(JSON.parse(row!.target_ref).epic_id).toBe(a.epic);
      expect(await h.queryOne('SELECT count(*) AS n FROM llm_work_items WHERE thread_id = ?', [a.thread_id])).toEqual({ n: 1 });
    }
    // Nothing half-stored: every thread that exists has its work item.
    const orphans = await h.queryOne('SELECT count(*) AS n FROM llm_threads t WHERE NOT EXISTS (SELECT 1 FROM llm_work_items w WHERE w.thread_id = t.id)');
    expect(orphans).toEqual({ n: 0 });
    // The restarted daemon serves them: one of them, through the CLI.
    const shown = await h.json<{ thread_id: string; status: string }>(['thread', acked[0]!.thread_id]);
    expect(['open', 'running', 'failed']).toContain(shown.status);
  });
});
