#!/usr/bin/env node
// gazette-sum: the example consumer application (per-key sums of NDJSON {"key","value"} records,
// the counterpart of the reference Go sum-consumer), run with runConsumer: `gazette-sum serve`,
// `gazette-sum print-config`.
const { runConsumer, sumApp } = await import('../dist/src/core/consumer/index.js');
await runConsumer(sumApp, { name: 'gazette-sum' });
