// The allocator of the broker/consumer core, as pure logic: read a keyspace snapshot into an
// allocation state, solve for desired assignments, and plan the etcd transactions of one round.
// Executing the plan (and watching etcd) is the core's job, through the keyspace module.

export * from './keys.js';
export * from './state.js';
export { FlowGraph } from './maxflow.js';
export * from './solve.js';
export * from './plan.js';
export * from './consistency.js';
