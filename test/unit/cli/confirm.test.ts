// Confirmation and progress helpers of destructive commands.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { checkConfirmFlags, confirmDestructive } from '../../../src/cli/confirm.js';
import { UsageError } from '../../../src/cli/exit.js';
import { Progress, formatBytes } from '../../../src/cli/progress.js';

const base = { question: 'Delete 3 fragments?', action: 'delete fragments' };

test('--dry-run never goes ahead, even with --yes, and never asks', async () => {
  const ask = async () => assert.fail('asked');
  assert.equal(await confirmDestructive({ ...base, yes: true, dryRun: true, isTTY: true, ask }), false);
});

test('--yes goes ahead without asking, with or without a terminal', async () => {
  const ask = async () => assert.fail('asked');
  assert.equal(await confirmDestructive({ ...base, yes: true, dryRun: false, isTTY: false, ask }), true);
  assert.equal(await confirmDestructive({ ...base, yes: true, dryRun: false, isTTY: true, ask }), true);
});

test('without a terminal and without --yes it refuses with a usage error', async () => {
  await assert.rejects(
    confirmDestructive({ ...base, yes: false, dryRun: false, isTTY: false }),
    (err: unknown) => err instanceof UsageError && /refusing to delete fragments .*--yes/.test((err as Error).message),
  );
});

test('on a terminal it asks and follows the answer', async () => {
  const asked: string[] = [];
  const answer = (v: boolean) => async (q: string) => {
    asked.push(q);
    return v;
  };
  assert.equal(await confirmDestructive({ ...base, yes: false, dryRun: false, isTTY: true, ask: answer(true) }), true);
  assert.equal(await confirmDestructive({ ...base, yes: false, dryRun: false, isTTY: true, ask: answer(false) }), false);
  assert.deepEqual(asked, ['Delete 3 fragments?', 'Delete 3 fragments?']);
});

test('progress draws only on a terminal', () => {
  const collect = (isTTY: boolean) => {
    const s = new PassThrough();
    let out = '';
    s.on('data', (d) => (out += d));
    const p = new Progress({ label: 'deleted', total: 2, totalBytes: 2048, stream: s as unknown as NodeJS.WriteStream, isTTY });
    p.tick(1, 1024);
    p.tick(1, 1024);
    p.finish();
    return out;
  };
  assert.equal(collect(false), '');
  const tty = collect(true);
  assert.match(tty, /2\/2 deleted  2\.0 KiB \/ 2\.0 KiB\n$/);
});

test('formatBytes', () => {
  assert.equal(formatBytes(0), '0 B');
  assert.equal(formatBytes(1023), '1023 B');
  assert.equal(formatBytes(1536), '1.5 KiB');
  assert.equal(formatBytes(3 * 1024 * 1024), '3.0 MiB');
});

test('--dry-run with --yes is a usage error, either alone is fine', () => {
  assert.throws(() => checkConfirmFlags({ dryRun: true, yes: true }), (e: unknown) => e instanceof UsageError && /--dry-run and --yes contradict each other/.test((e as Error).message));
  for (const [dryRun, yes] of [[true, false], [false, true], [false, false]] as const) checkConfirmFlags({ dryRun, yes });
});
