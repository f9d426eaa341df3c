/** The pressure monitor of a daemon: the machine's (or COMBINE_PRESSURE_ROOT's) signals, its own WAL, its checkpoint. */
import type { DaemonConfig } from '../config/config.js';
import type { Clock } from '../../core/clock.js';
import type { Logger } from '../../core/logger.js';
import { walBytes, type Maintenance } from '../runtime/maintenance.js';
import { PressureMonitor } from './monitor.js';
import { systemProbe } from './probe.js';

export function createPressureMonitor(d: {
  config: DaemonConfig;
  clock: Clock;
  logger: Logger;
  maintenance: Pick<Maintenance, 'run'>;
  onRelief: () => void;
}): PressureMonitor {
  const walPath = `${d.config.dbPath}-wal`;
  const monitor: PressureMonitor = new PressureMonitor({
    config: d.config.pressure,
    probe: systemProbe(d.config.pressure.root),
    clock: d.clock,
    walBytes: () => walBytes(walPath),
    checkpoint: () => d.maintenance.run(),
    onChange: (active) => {
      const s = monitor.snapshot();
      if (active.length === 0) d.logger.info({ component: 'pressure' }, 'resource pressure is over: claiming runs normally, commands are accepted');
      else
        d.logger.warn(
          { component: 'pressure', active, paused: s.paused, claim_interval_ms: s.claim_interval_ms, accepting_commands: s.accepting_commands },
          `resource pressure: ${active.join(', ')}`,
        );
      d.onRelief();
    },
  });
  return monitor;
}
