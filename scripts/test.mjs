// Runs every compiled test file under dist/test with Node's test runner and ends with one
// summary line, `N passed, N failed`, that CI reads. Usage: node scripts/test.mjs [unit|integration|interop ...]
import { spawn } from 'node:child_process';
import { readdirSync, statSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const suites = process.argv.slice(2);
const roots = (suites.length ? suites : ['unit', 'integration', 'interop']).map((s) => join('dist/test', s));

function walk(dir, out) {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (name.endsWith('.test.js')) out.push(p);
  }
  return out;
}

const files = roots.flatMap((r) => walk(r, []));
if (files.length === 0) {
  console.error('no test files found under ' + roots.join(', ') + ' (did the build run?)');
  process.exit(1);
}

let passed = 0;
let failed = 0;
let skipped = 0;
const child = spawn(process.execPath, ['--test', '--test-reporter=spec', '--test-concurrency=1', ...files], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
let buf = '';
child.stdout.on('data', (chunk) => {
  process.stdout.write(chunk);
  buf += chunk.toString('utf8');
});
child.on('close', (code) => {
  for (const line of buf.split('\n')) {
    const m = /^\u2139 (pass|fail|skipped|todo) (\d+)/.exec(line.trim());
    if (!m) continue;
    const n = Number(m[2]);
    if (m[1] === 'pass') passed = n;
    else if (m[1] === 'fail') failed = n;
    else skipped += n;
  }
  if (code !== 0 && failed === 0) failed = 1;
  console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  process.exit(code === 0 && failed === 0 ? 0 : 1);
});
