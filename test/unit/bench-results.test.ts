// The results files of `npm run bench` (bench/results.ts): what a benchmark prints is recorded
// under its name, a rewrite replaces the latest results and keeps what lies below EARLIER.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchResults, EARLIER } from '../../bench/results.js';

test('each benchmark gets its own file; a rewrite keeps the earlier results below the marker', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-bench-results-'));
  const log = console.log;
  const seen: string[] = [];
  console.log = (...a: unknown[]) => void seen.push(a.join(' '));
  try {
    writeFileSync(join(dir, 'direct.md'), `# old\n\nold figures\n\n${EARLIER}\n\n## 1 December\n\nkept log\n`);
    const r = new BenchResults();
    console.log('before any benchmark');
    await r.during('direct', async () => console.log('direct run 1: 0.50 s'));
    r.section('read', 'append');
    console.log('summary row', 3);
    r.section();
    console.log('after');
    assert.deepEqual(r.names().sort(), ['append', 'direct', 'read']);
    const written = r.write(dir, { machine: 'machine: test', repo: dir, failures: [], command: 'npm run bench' });
    assert.equal(written.length, 3);
    const direct = readFileSync(join(dir, 'direct.md'), 'utf8');
    assert.match(direct, /^# Benchmark `direct`: latest results/);
    assert.match(direct, /- commit: unknown \(not a git checkout\)/);
    assert.match(direct, /```\ndirect run 1: 0\.50 s\n```/);
    assert.ok(!direct.includes('old figures'), 'the latest results are replaced');
    assert.ok(direct.endsWith(`${EARLIER}\n\n## 1 December\n\nkept log\n`), 'the earlier results are kept as they were');
    const read = readFileSync(join(dir, 'read.md'), 'utf8');
    assert.match(read, /```\nsummary row 3\n```/);
    assert.ok(!read.includes('after') && !read.includes('before any'));
    // Everything still reached the terminal.
    assert.deepEqual(seen, ['before any benchmark', 'direct run 1: 0.50 s', 'summary row 3', 'after']);
    // Rewritten again: the same earlier part, once.
    r.write(dir, { machine: 'machine: test', repo: dir, failures: ['x failed'], command: 'npm run bench' });
    const again = readFileSync(join(dir, 'direct.md'), 'utf8');
    assert.equal(again.split(EARLIER).length, 2);
    assert.match(again, /!! x failed/);
    assert.ok(again.endsWith(`${EARLIER}\n\n## 1 December\n\nkept log\n`));
  } finally {
    console.log = log;
    rmSync(dir, { recursive: true, force: true });
  }
});
