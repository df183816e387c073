// shards recover in-process: a recovery log written with the library's LogWriter is served by a
// scripted broker's Read, the shard and its hints by a scripted consumer; the files that come out,
// which hints are played, the --dir / --force rules, clean-up after a failure or Ctrl-C, and bad
// input.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as tick } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import type { ServerWritableStream } from '@grpc/grpc-js';

import { ReadResponse, Status, type ReadRequest } from '../../../src/lib/protocol/gen/broker/protocol.js';
import type { FSMHints } from '../../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { LogWriter, type RecordedFrame } from '../../../src/lib/recoverylog/index.js';
import { startJournalStub, stubHeader, type StubServer } from '../../../src/testing/stubs.js';
import { describeInProcess, runInProcess } from '../../helpers/inproc.js';
import { fromStubShards, startStubConsumer, type StubShard } from '../../helpers/stub-consumer.js';

const LOG = 'recovery/rec-a';
const HANG = 'recovery/hang';

/** The log's bytes, and the writer's hints at its end. */
function buildLog(): { content: Buffer; hints: FSMHints } {
  const w = new LogWriter({ log: LOG, author: 0x5151 });
  const frames: RecordedFrame[] = [];
  const put = (f: RecordedFrame) => {
    frames.push(f);
    return f;
  };
  const sst = w.create('/000001.sst');
  put(sst);
  put(w.write(sst.fnode, Buffer.from('hello '), 0n));
  put(w.write(sst.fnode, Buffer.from('world'), 6n));
  const current = w.create('/CURRENT');
  put(current);
  put(w.write(current.fnode, Buffer.from('MANIFEST-000001\n'), 0n));
  const tmp = w.create('/tmp.log');
  put(tmp);
  put(w.write(tmp.fnode, Buffer.from('scratch'), 0n));
  put(w.unlink(tmp.fnode, '/tmp.log'));
  put(w.link(sst.fnode, '/sub/dir/alias.sst'));
  put(w.property('/IDENTITY', 'db-guid-1\n'));
  return { content: Buffer.concat(frames.map((f) => f.bytes)), hints: w.hints() };
}

const { content, hints: finalHints } = buildLog();
const head = BigInt(content.length);

/** Hints naming a segment past the log's head: playback must fail ("possible data loss"). */
const beyondHead: FSMHints = {
  log: 'recovery/lost',
  live_nodes: [{ fnode: 1n, segments: [{ author: 0x5151, first_seq_no: 1n, first_offset: head + 100n, first_checksum: 0, last_seq_no: 3n, last_offset: head + 200n, log: '' }] }],
  properties: [],
};

/** The final hints, of the same content in another shard's log. */
const hintsOf = (log: string): FSMHints => ({ ...finalHints, log });

const shards: StubShard[] = [
  { id: 'rec-a', backups: [undefined, undefined] },
  { id: 'with-primary', primary: hintsOf('recovery/with-primary'), backups: [hintsOf('recovery/with-primary')] },
  { id: 'with-backup', primary: undefined, backups: [undefined, hintsOf('recovery/with-backup')] },
  { id: 'lost', primary: beyondHead, backups: [] },
  { id: 'no-log', recoveryLogPrefix: '' },
  { id: 'hang', primary: undefined, backups: [] },
];

let broker: StubServer;
let consumer: StubServer;
let work = '';

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'recover-'));
  broker = await startJournalStub({
    read: (call: ServerWritableStream<ReadRequest, ReadResponse>) => {
      const req = call.request;
      if (req.journal === HANG) return; // never answers: the command waits until interrupted
      // Every recovery log but hang's holds the same content.
      if (!req.journal.startsWith('recovery/')) {
        call.write(ReadResponse.fromPartial({ status: Status.JOURNAL_NOT_FOUND, header: stubHeader() }));
        call.end();
        return;
      }
      const fragment = { journal: req.journal, begin: 0n, end: head, sum: {}, backing_store: '', mod_time: 0n, path_postfix: '', compression_codec: 1 };
      const from = req.offset < 0n ? head : req.offset;
      if (req.metadata_only) {
        call.write(ReadResponse.fromPartial({ status: from < head ? Status.OK : Status.OFFSET_NOT_YET_AVAILABLE, header: stubHeader(), offset: from, write_head: head, fragment: from < head ? fragment : undefined }));
        call.end();
        return;
      }
      const end = req.end_offset > 0n && req.end_offset < head ? req.end_offset : head;
      if (from < end) {
        call.write(ReadResponse.fromPartial({ status: Status.OK, header: stubHeader(), offset: from, write_head: head, fragment }));
        // In pieces, so that frames straddle responses.
        for (let at = Number(from); at < Number(end); at += 7) {
          call.write(ReadResponse.fromPartial({ offset: BigInt(at), content: content.subarray(at, Math.min(at + 7, Number(end))) }));
        }
      }
      call.write(ReadResponse.fromPartial({ status: Status.OFFSET_NOT_YET_AVAILABLE, header: stubHeader(), offset: end, write_head: head }));
      call.end();
    },
  } as never);
  const listed = fromStubShards(shards);
  consumer = await startStubConsumer(listed.shards, listed.hints);
});
after(async () => {
  await broker?.stop();
  await consumer?.stop();
  rmSync(work, { recursive: true, force: true });
});

const run = async (args: string[], env: Record<string, string> = {}) => {
  const r = await runInProcess(args, { env: { BROKER_ADDRESS: broker.address, CONSUMER_ADDRESS: consumer.address, ...env } });
  return { ...r, what: describeInProcess(args, r) };
};

let n = 0;
const fresh = () => join(work, `d${++n}`);

/** Every file under `dir`, relative, with its content. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p, `${rel}/${name}`);
      else out[`${rel}/${name}`] = readFileSync(p, 'utf8');
    }
  };
  walk(dir, '');
  return out;
}

const RECOVERED = {
  '/000001.sst': 'hello world',
  '/CURRENT': 'MANIFEST-000001\n',
  '/IDENTITY': 'db-guid-1\n',
  '/sub/dir/alias.sst': 'hello world',
};

describe('shards recover', () => {
  it('replays the whole log when the shard has no hints, into a directory it creates', async () => {
    const dir = join(fresh(), 'nested', 'db');
    const r = await run(['shards', 'recover', '--id', 'rec-a', '-d', dir]);
    assert.equal(r.code, 0, r.what);
    assert.deepEqual(tree(dir), RECOVERED);
    // A hard link: one file under two paths.
    assert.equal(statSync(join(dir, '000001.sst')).ino, statSync(join(dir, 'sub/dir/alias.sst')).ino);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, new RegExp(`^recovered shard rec-a into ${dir}: 3 file\\(s\\) and 1 property file\\(s\\), \\d+ B, from ${LOG} through offset ${head} \\(hints: none \\(full replay\\); \\d+ op\\(s\\) applied, 0 skipped\\)\\n$`));
    // The head came from a metadata-only read: nothing was appended to the log.
    const methods = broker.requests.map((q) => q.method);
    assert.ok(!methods.includes('append'), methods.join(','));
    assert.ok(broker.requests.some((q) => q.method === 'read' && (q.request as ReadRequest).metadata_only));
  });

  it('plays the primary hints when present; -o json reports files and bytes', async () => {
    const dir = fresh();
    const r = await run(['shards', 'recover', '--id', 'with-primary', '-d', dir, '-o', 'json']);
    assert.equal(r.code, 0, r.what);
    assert.deepEqual(tree(dir), RECOVERED);
    const doc = JSON.parse(r.stdout) as { shard: string; log: string; hints: string; files: { path: string; size: number }[]; properties: string[]; bytes: number };
    assert.equal(doc.shard, 'with-primary');
    assert.equal(doc.log, 'recovery/with-primary');
    assert.equal(doc.hints, 'primary');
    assert.deepEqual(doc.files, [{ path: '/000001.sst', size: 11 }, { path: '/CURRENT', size: 16 }, { path: '/sub/dir/alias.sst', size: 11 }]);
    assert.deepEqual(doc.properties, ['/IDENTITY']);
    assert.equal(doc.bytes, 11 + 16);
    assert.equal(r.stderr, '');
  });

  it('plays the first stored backup when there are no primary hints', async () => {
    const dir = fresh();
    mkdirSync(dir); // an empty directory is fine without --force
    const r = await run(['shards', 'recover', '--id', 'with-backup', '-d', dir, '-o', 'json']);
    assert.equal(r.code, 0, r.what);
    assert.equal((JSON.parse(r.stdout) as { hints: string }).hints, 'backup.1');
    assert.deepEqual(tree(dir), RECOVERED);
  });

  it('refuses a non-empty --dir without --force (exit 2, nothing touched); --force empties it first', async () => {
    const dir = fresh();
    mkdirSync(dir);
    writeFileSync(join(dir, 'old.txt'), 'keep me');
    const r = await run(['shards', 'recover', '--id', 'rec-a', '-d', dir]);
    assert.equal(r.code, 2, r.what);
    assert.match(r.stderr, /^gazctl: -d\/--dir .* is not empty \(pass --force to delete what it holds first, or name a new directory\)\n$/);
    assert.deepEqual(tree(dir), { '/old.txt': 'keep me' });
    const f = await run(['shards', 'recover', '--id', 'rec-a', '-d', dir, '--force']);
    assert.equal(f.code, 0, f.what);
    assert.deepEqual(tree(dir), RECOVERED);
  });

  it('a --dir that is a file is a usage error', async () => {
    const file = fresh();
    writeFileSync(file, 'x');
    const r = await run(['shards', 'recover', '--id', 'rec-a', '-d', file, '--force']);
    assert.equal(r.code, 2, r.what);
    assert.match(r.stderr, /is not a directory\n$/);
    assert.equal(readFileSync(file, 'utf8'), 'x');
  });

  it('a failed playback removes what it wrote: a directory it made, or the contents of one that was there', async () => {
    const made = join(fresh(), 'db');
    const r = await run(['shards', 'recover', '--id', 'lost', '-d', made]);
    assert.equal(r.code, 1, r.what);
    assert.equal(r.stderr.split('\n').filter(Boolean).length, 1, r.what);
    assert.match(r.stderr, /^gazctl: recovery of shard lost failed \(removed what it wrote under .*\): .*possible data loss/);
    assert.ok(!existsSync(made) && !existsSync(join(made, '..')), 'the directories the run made are gone');

    const was = fresh();
    mkdirSync(was);
    const e = await run(['shards', 'recover', '--id', 'lost', '-d', was]);
    assert.equal(e.code, 1, e.what);
    assert.deepEqual(readdirSync(was), []);
  });

  it('Ctrl-C stops the playback and removes what it wrote (exit 130)', async () => {
    const dir = fresh();
    const running = run(['shards', 'recover', '--id', 'hang', '-d', dir]);
    // Wait until the command reads the log (the broker never answers), then interrupt it.
    while (!broker.requests.some((q) => q.method === 'read' && (q.request as ReadRequest).journal === HANG)) await tick();
    process.emit('SIGINT');
    const r = await running;
    assert.equal(r.code, 130, r.what);
    assert.match(r.stderr, /^gazctl: shards recover interrupted; removed what it wrote under /);
    assert.ok(!existsSync(dir));
  });

  it('bad input is one line: missing --id or --dir (2), unknown shard, shard without a recovery log, unreachable consumer (1)', async () => {
    const dir = fresh();
    const cases: [string[], Record<string, string>, number, RegExp][] = [
      [['shards', 'recover', '-d', dir], {}, 2, /^gazctl: missing required flag --id/],
      [['shards', 'recover', '--id', 'rec-a'], {}, 2, /^gazctl: missing required flag -d\/--dir/],
      [['shards', 'recover', '--id', 'nope', '-d', dir], {}, 1, /^gazctl: no shard exists with id "nope"$/m],
      [['shards', 'recover', '--id', 'no-log', '-d', dir], {}, 1, /^gazctl: shard no-log has no recovery log/],
      [['shards', 'recover', '--id', 'rec-a', '-d', dir, '--timeout', '1s'], { CONSUMER_ADDRESS: 'http://127.0.0.1:1' }, 1, /^gazctl: consumer http:\/\/127\.0\.0\.1:1 is unreachable/],
    ];
    for (const [args, env, code, re] of cases) {
      const r = await run(args, env);
      assert.equal(r.code, code, r.what);
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.what);
      assert.match(r.stderr, re, r.what);
      assert.ok(!existsSync(dir), r.what);
    }
  });
});
