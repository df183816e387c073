#!/usr/bin/env node
// The broker daemon: `gazette serve`, our TypeScript drop-in for upstream's broker.
const { main } = await import('../dist/src/core/broker/main.js');
main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`gazette: ${err && err.message ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
