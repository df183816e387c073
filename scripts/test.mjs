// Runs every compiled test file under dist/test with Node's test runner and ends with one
// summary line, `N passed, N failed`, that CI reads. Usage: node scripts/test.mjs [unit|integration|interop ...]
//
// The journals suite (the integration files written for the journals commands, plus the
// interop parity suite) then runs a second time against our own brokers
// (GAZCTL_TEST_BROKER=ts), so CI checks both broker implementations; the summary line adds up
// both passes. A GAZCTL_TEST_BROKER set by the caller means one pass, on that implementation.
// Likewise the files of CONSUMER_SUITE run once more on our own consumer (GAZCTL_TEST_CONSUMER=ts)
// unless the caller set GAZCTL_TEST_CONSUMER.
import { spawn } from 'node:child_process';
import { readdirSync, statSync, existsSync } from 'node:fs';
import { basename, join } from 'node:path';

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

/** Files of the journals suite: they start their cluster with the implementation GAZCTL_TEST_BROKER names. */
const JOURNALS_SUITE = [
  /^integration\/journals-[^/]+\.test\.js$/,
  /^integration\/(bad-inputs|append-stall|append-buffering|harness|library|failover|transport-diagnostics|health)\.test\.js$/,
  /^interop\/journals-parity\.test\.js$/,
];
/**
 * Files written against the reference Go consumer that run a second time on our own consumer
 * (GAZCTL_TEST_CONSUMER=ts): shards prune-log, whose hints our consumer writes as Go's does.
 */
const CONSUMER_SUITE = [/^integration\/shards-prune-log\.test\.js$/];
function inConsumerSuite(file) {
  const rel = file.split(/[\\/]/).slice(-2).join('/');
  return CONSUMER_SUITE.some((re) => re.test(rel));
}

/** Files that choose their broker implementations themselves: a second pass would repeat them. */
const PINNED = [/^integration\/journals-flush\.test\.js$/, /^integration\/core-security\.test\.js$/, /^integration\/consumer-security\.test\.js$/, /^integration\/net-splits\.test\.js$/, /^integration\/etcd-tls\.test\.js$/];
function inJournalsSuite(file) {
  const rel = file.split(/[\\/]/).slice(-2).join('/');
  return JOURNALS_SUITE.some((re) => re.test(rel)) && !PINNED.some((re) => re.test(rel));
}

const files = roots.flatMap((r) => walk(r, []));
if (files.length === 0) {
  console.error('no test files found under ' + roots.join(', ') + ' (did the build run?)');
  process.exit(1);
}

const passes = [{ label: process.env.GAZCTL_TEST_BROKER || 'go', what: 'broker implementation', env: {}, files }];
if (!process.env.GAZCTL_TEST_BROKER) {
  const again = files.filter(inJournalsSuite);
  if (again.length) passes.push({ label: 'ts', what: 'broker implementation', env: { GAZCTL_TEST_BROKER: 'ts' }, files: again });
}
if (!process.env.GAZCTL_TEST_CONSUMER) {
  const again = files.filter(inConsumerSuite);
  if (again.length) passes.push({ label: 'ts', what: 'consumer implementation', env: { GAZCTL_TEST_CONSUMER: 'ts' }, files: again });
}

/** One run of node's test runner; resolves with its counts. */
function run(pass) {
  return new Promise((resolve) => {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    const child = spawn(process.execPath, ['--test', '--test-reporter=spec', '--test-concurrency=1', ...pass.files], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...pass.env },
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
        if (m[1] === 'pass') counts.passed = n;
        else if (m[1] === 'fail') counts.failed = n;
        else counts.skipped += n;
      }
      if (code !== 0 && counts.failed === 0) counts.failed = 1;
      resolve(counts);
    });
  });
}

const total = { passed: 0, failed: 0, skipped: 0 };
for (const [i, pass] of passes.entries()) {
  if (passes.length > 1) {
    const names = i === 0 ? 'every test file' : pass.files.map((f) => basename(f, '.test.js')).join(', ');
    console.log(`\n=== pass ${i + 1}/${passes.length}: ${pass.what} ${pass.label}: ${names}\n`);
  }
  const started = Date.now();
  const c = await run(pass);
  if (passes.length > 1) {
    // Not in the `N passed, N failed` form: only the last line of the run carries that.
    console.log(`\n=== pass ${i + 1}/${passes.length} (${pass.label}) done in ${((Date.now() - started) / 1000).toFixed(0)} s: ${c.passed} ok, ${c.failed} not ok`);
  }
  total.passed += c.passed;
  total.failed += c.failed;
  total.skipped += c.skipped;
}
console.log(`${total.passed} passed, ${total.failed} failed${total.skipped ? `, ${total.skipped} skipped` : ''}`);
process.exit(total.failed === 0 ? 0 : 1);
