/** Entry of dist/sim.js: loaded lazily by `combine demo` and `combine sim`. */
export { createSimulator, FAULT_KINDS, type FaultRule, type Simulator, type SimulatorOptions } from './simulator.js';
