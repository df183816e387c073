// The Recorder and its recorded file system: what it writes plays back with our player to the
// directory recorded; frames are byte-exact protobuf of upstream's ops; appends are ordered,
// gated by barriers, retried on transient failures and fenced by the author's register.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MemoryLogSource } from '../../../../src/lib/recoverylog/memory-source.js';
import { Recorder, takeOverLog } from '../../../../src/lib/recoverylog/recorder.js';
import { RecordedFs } from '../../../../src/lib/recoverylog/recorded-fs.js';
import { emptyHints, encodeHints, decodeHints } from '../../../../src/lib/recoverylog/hints.js';
import { playLog, playFsm } from '../../../../src/lib/recoverylog/player.js';
import { decodeFrames } from '../../../../src/lib/recoverylog/framing.js';
import { BrokerStatusError } from '../../../../src/lib/protocol/errors.js';
import { Status } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import type { RecordedOp } from '../../../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { crc32c } from '../../../../src/lib/recoverylog/crc32c.js';
import { MemoryAppends } from './memory-appends.js';
import { snapshot, tempDir } from './helpers.js';

const LOG = 'recovery/logs/shard-000';

async function contentOf(src: MemoryLogSource, log: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  await src.head(log); // reads go up to the head asked last
  for await (const c of src.read(log, 0n)) parts.push(Buffer.from(c.content));
  return Buffer.concat(parts);
}

async function opsOf(src: MemoryLogSource, log: string): Promise<{ op: RecordedOp; frame: Buffer }[]> {
  const out: { op: RecordedOp; frame: Buffer }[] = [];
  const all = await contentOf(src, log);
  await src.head(log);
  for await (const ev of decodeFrames(log, 0n, src.read(log, 0n))) {
    if (ev.kind === 'op') out.push({ op: ev.op, frame: all.subarray(Number(ev.op.first_offset), Number(ev.op.last_offset)) });
  }
  return out;
}

function describeOp(op: RecordedOp): string {
  if (op.create) return `create ${op.create.path}`;
  if (op.link) return `link ${op.link.fnode} ${op.link.path}`;
  if (op.unlink) return `unlink ${op.unlink.fnode} ${op.unlink.path}`;
  if (op.write) return `write ${op.write.fnode} @${op.write.offset}+${op.write.length}`;
  if (op.property) return `property ${op.property.path}`;
  return 'noop';
}

/** A recorder of a new log, as a consumer gets one: played (empty), handed off, opened. */
async function newRecorder(client: MemoryAppends, log: string, author: number, dir: string, extra: Partial<Parameters<typeof takeOverLog>[0]> = {}): Promise<Recorder> {
  return (await takeOverLog({ client, source: client.src, hints: emptyHints(log), dir, author, ...extra })).recorder;
}

describe('Recorder', () => {
  it('records a directory that plays back to the same files', async () => {
    const src = new MemoryLogSource({ chunkSize: 13 });
    const client = new MemoryAppends(src);
    const dir = tempDir('rec');
    const rec = await newRecorder(client, LOG, 0xabc, dir);
    const fs = new RecordedFs(rec);

    const a = await fs.create(join(dir, 'a.sst'));
    await a.write('hello ');
    await a.write(Buffer.from('world'));
    await a.writeAt(Buffer.from('J'), 0n);
    await a.close();
    mkdirSync(join(dir, 'sub'));
    await fs.link(join(dir, 'a.sst'), join(dir, 'sub', 'hard'));
    const b = await fs.openFile(join(dir, 'b.tmp'), 'wx');
    await b.write('temporary');
    await b.sync();
    await b.close();
    await fs.rename(join(dir, 'b.tmp'), join(dir, 'b.log'));
    const c = await fs.create(join(dir, 'gone'));
    await c.write('x');
    await c.close();
    await fs.remove(join(dir, 'gone'));
    writeFileSync(join(dir, 'unknown'), 'not recorded');
    await assert.rejects(fs.openFile(join(dir, 'unknown'), 'r+'), /open of unknown file \/unknown without O_CREAT/);
    // A rename onto a property path records the content as a property (RocksDB's IDENTITY).
    const id = await fs.create(join(dir, 'IDENTITY.tmp'));
    await id.write('db-guid-1\n');
    await id.close();
    await fs.rename(join(dir, 'IDENTITY.tmp'), join(dir, 'IDENTITY'));
    await fs.sync();
    // Truncating open of a known file records a new file replacing it.
    const a2 = await fs.openFile(join(dir, 'b.log'), 'w');
    await a2.write('rewritten');
    await a2.close();
    const hints = await rec.buildHints();

    const out = tempDir('play');
    const played = await playLog(src, emptyHints(LOG), out, { clearDir: true });
    const want = snapshot(dir);
    delete want['/unknown'];
    assert.deepEqual(snapshot(out), want);
    assert.equal(readFileSync(join(out, 'a.sst'), 'utf8'), 'Jello world');
    assert.equal(readFileSync(join(out, 'b.log'), 'utf8'), 'rewritten');
    // The recorder's hints play to the same directory, and match the player's state.
    const out2 = tempDir('play');
    await playLog(src, decodeHints(encodeHints(hints)), out2, { clearDir: true });
    assert.deepEqual(snapshot(out2), snapshot(out));
    assert.equal(played.fsm.nextSeqNo, rec.fsm.nextSeqNo);
    assert.equal(played.fsm.nextChecksum, rec.fsm.nextChecksum);
    assert.deepEqual(hints.live_nodes.map((n) => n.fnode), played.hints.live_nodes.map((n) => n.fnode));

    const ops = (await opsOf(src, LOG)).map((o) => describeOp(o.op));
    assert.deepEqual(ops, [
      'noop', // the hand-off
      'create /a.sst',
      'write 2 @0+6',
      'write 2 @6+5',
      'write 2 @0+1',
      'link 2 /sub/hard',
      'create /b.tmp',
      'write 7 @0+9',
      'link 7 /b.log',
      'unlink 7 /b.tmp',
      'create /gone',
      'write 11 @0+1',
      'unlink 11 /gone',
      'create /IDENTITY.tmp',
      'write 14 @0+10',
      'property /IDENTITY',
      'unlink 14 /IDENTITY.tmp',
      'unlink 7 /b.log', // the truncating open of a known file
      'create /b.log',
      'write 19 @0+9',
    ]);
    // The hand-off unions the author's fence; the recorder's first barrier checks nothing; every
    // later append checks the fence.
    const fence = 'author=' + (0xabc).toString(32);
    assert.deepEqual([client.appends[0]!.union, client.appends[0]!.check], [fence, undefined]);
    assert.deepEqual([client.appends[1]!.union, client.appends[1]!.check], [undefined, undefined]);
    assert.ok(client.appends.slice(2).every((a) => a.check === fence && a.union === undefined));
  });

  it('writes frames byte for byte as upstream (protobuf fields, fixed framing, data after the frame)', async () => {
    const src = new MemoryLogSource();
    const client = new MemoryAppends(src);
    const dir = tempDir('rec');
    const rec = await newRecorder(client, LOG, 0x01020304, dir);
    const fnode = rec.recordCreate(join(dir, 'f'));
    rec.recordWriteAt(fnode, Buffer.from('hi'), 3n);
    rec.recordLink(join(dir, 'f'), join(dir, 'g'));
    await rec.barrier();
    const got = (await contentOf(src, LOG)).toString('hex');
    // Hand-derived from the RecordedOp proto: seq_no (1, varint), checksum (2, fixed32), author
    // (3, fixed32), create (4), link (5), write (7); each frame is magic 66339336, uint32le length.
    const payload0 = '0801' + '1d04030201'; // the hand-off no-op: seq 1, checksum 0 (omitted), author
    const frame0 = '66339336' + '07000000' + payload0;
    const sum0 = crc(Buffer.from(payload0, 'hex'), 0);
    const payload1 = '0802' + '15' + le32(sum0) + '1d04030201' + '2204' + '0a022f66'; // create{path:"/f"}
    const frame1 = '66339336' + hexLen(payload1) + payload1;
    const sum1 = crc(Buffer.from(payload1, 'hex'), sum0);
    const payload2 = '0803' + '15' + le32(sum1) + '1d04030201' + '3a06' + '080210031802'; // write{fnode 2, offset 3, length 2}
    const frame2 = '66339336' + hexLen(payload2) + payload2 + Buffer.from('hi').toString('hex');
    const sum2 = crc(Buffer.from(payload2, 'hex'), sum1);
    const payload3 = '0804' + '15' + le32(sum2) + '1d04030201' + '2a06' + '0802' + '12022f67'; // link{fnode 2, path "/g"}
    const frame3 = '66339336' + hexLen(payload3) + payload3;
    assert.equal(got, frame0 + frame1 + frame2 + frame3);
  });

  it('holds ops recorded after barrier(waitFor) until waitFor resolves, and fails on its rejection', async () => {
    const src = new MemoryLogSource();
    const client = new MemoryAppends(src);
    const dir = tempDir('rec');
    const rec = await newRecorder(client, LOG, 7, dir);
    const f = rec.recordCreate(join(dir, 'f'));
    let release!: () => void;
    const ack = new Promise<void>((r) => (release = r));
    void rec.barrier([ack]);
    rec.recordWriteAt(f, Buffer.from('after-ack'), 0n);
    const done = rec.barrier();
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r)); // let the append chain run as far as it can
    const before = (await opsOf(src, LOG)).map((o) => describeOp(o.op));
    assert.deepEqual(before, ['noop', 'create /f']);
    release();
    await done;
    assert.deepEqual((await opsOf(src, LOG)).map((o) => describeOp(o.op)), ['noop', 'create /f', 'write 2 @0+9']);

    rec.recordWriteAt(f, Buffer.from('z'), 9n);
    const failed = rec.barrier([Promise.reject(new Error('ack append failed'))]);
    rec.recordWriteAt(f, Buffer.from('never'), 10n);
    await assert.rejects(rec.barrier(), /ack append failed/);
    await assert.rejects(failed, /ack append failed/);
    assert.deepEqual((await opsOf(src, LOG)).map((o) => describeOp(o.op)), ['noop', 'create /f', 'write 2 @0+9', 'write 2 @9+1']);
  });

  it('retries transient append failures and keeps order', async () => {
    const src = new MemoryLogSource();
    const client = new MemoryAppends(src);
    const retries: number[] = [];
    const dir = tempDir('rec');
    const rec = await newRecorder(client, LOG, 9, dir);
    (rec as unknown as { opts: { delay: () => number; onRetry: (i: { attempt: number }) => void } }).opts.delay = () => 1;
    (rec as unknown as { opts: { onRetry: (i: { attempt: number }) => void } }).opts.onRetry = (i) => retries.push(i.attempt);
    client.failNext = [client.unavailable(), client.unavailable()];
    const f = rec.recordCreate(join(dir, 'f'));
    rec.recordWriteAt(f, Buffer.from('abc'), 0n);
    await rec.barrier();
    assert.deepEqual(retries, [0, 1]);
    const out = tempDir('play');
    await playLog(src, emptyHints(LOG), out, { clearDir: true });
    assert.equal(readFileSync(join(out, 'f'), 'utf8'), 'abc');
  });

  it('is fenced off by a hand-off to another author; the new author continues the log', async () => {
    const src = new MemoryLogSource();
    const client = new MemoryAppends(src);
    const dirA = tempDir('rec');
    const a = await newRecorder(client, LOG, 1, dirA);
    const fsA = new RecordedFs(a);
    const fa = await fsA.create(join(dirA, 'state'));
    await fa.write('from-a');
    await fa.close();
    await a.barrier();

    // Another process plays the log and hands it off to author 2.
    const dirB = tempDir('play');
    const before = await playFsm(src, emptyHints(LOG));
    const taken = await takeOverLog({ client, source: src, hints: emptyHints(LOG), dir: dirB, author: 2 });
    const b = taken.recorder;
    assert.equal(b.fsm.nextSeqNo, before.fsm.nextSeqNo + 1n, 'the hand-off no-op took');
    assert.equal(readFileSync(join(dirB, 'state'), 'utf8'), 'from-a');

    // The zombie's next append fails on the register check, and the recorder stays failed.
    a.recordWriteAt(a.fsm.links.get('/state')!, Buffer.from('zombie'), 0n);
    await assert.rejects(a.barrier(), (e: unknown) => e instanceof BrokerStatusError && e.status === Status.REGISTER_MISMATCH);
    await assert.rejects(a.barrier(), /REGISTER_MISMATCH/);

    const fsB = new RecordedFs(b);
    const fb = await fsB.openFile(join(dirB, 'state'), 'w');
    await fb.write('from-b');
    await fb.close();
    const hints = await b.buildHints();
    const out = tempDir('play');
    await playLog(src, hints, out, { clearDir: true });
    assert.deepEqual(snapshot(out), { '/state': Buffer.from('from-b').toString('hex') });
  });

  it('recording to another log than the one played writes a fenced no-op first', async () => {
    const src = new MemoryLogSource();
    const client = new MemoryAppends(src);
    const dir = tempDir('rec');
    const a = await newRecorder(client, 'logs/parent', 3, dir);
    const f = a.recordCreate(join(dir, 'x'));
    a.recordWriteAt(f, Buffer.from('parent'), 0n);
    const parentHints = await a.buildHints();

    const played = await playFsm(src, parentHints);
    const b = await Recorder.open({ client, log: 'logs/child', author: 4, dir, fsm: played.fsm });
    b.recordWriteAt(f, Buffer.from('P'), 0n);
    const hints = await b.buildHints();
    const childOps = (await opsOf(src, 'logs/child')).map((o) => [describeOp(o.op), o.op.author, o.op.seq_no]);
    assert.deepEqual(childOps, [
      ['noop', 4, 4n], // continues the parent's seq 1 (hand-off), 2 (create), 3 (write)
      ['write 2 @0+1', 4, 5n],
    ]);
    const noopAppend = client.appends.find((x) => x.journal === 'logs/child' && x.union);
    assert.equal(noopAppend?.union, 'author=4');
    assert.equal(noopAppend?.check, undefined);
    const out = tempDir('play');
    await playLog(src, hints, out, { clearDir: true });
    assert.equal(readFileSync(join(out, 'x'), 'utf8'), 'Parent');
  });

  it('refuses ops that do not match the recorded directory', async () => {
    const src = new MemoryLogSource();
    const dir = tempDir('rec');
    const rec = await newRecorder(new MemoryAppends(src), LOG, 5, dir);
    assert.throws(() => rec.recordRemove(join(dir, 'nope')), /delete of unknown path \/nope/);
    assert.throws(() => rec.recordCreate('/elsewhere/f'), /is not a file under/);
    assert.throws(() => rec.recordCreate(join(dir, 'IDENTITY')), /property path/);
    rec.recordCreate(join(dir, 'f'));
    assert.throws(() => rec.recordOpenFile(join(dir, 'f'), 0o200 /* O_EXCL on Linux */ | 0o100 | 1), /O_EXCL/);
    await assert.rejects(Recorder.open({ client: new MemoryAppends(src), log: LOG, author: 5, dir: 'relative/dir' }), /absolute, normalized/);
  });
});

function le32(n: number): string {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b.toString('hex');
}

function hexLen(payloadHex: string): string {
  return le32(payloadHex.length / 2);
}

function crc(b: Uint8Array, prior: number): number {
  return crc32c(b, prior);
}
