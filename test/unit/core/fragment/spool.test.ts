// The spool: staging, commit, roll-back, rolls by proposal, reads of committed content, and the
// primary's roll rules.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  fragmentEquals,
  nextProposal,
  readLocal,
  rollReason,
  Spool,
  SpoolDeltaError,
  SpoolFileClosedError,
  streamLocal,
  type LocalFragment,
} from '../../../../src/core/fragment/spool.js';
import { nanosToDuration } from '../../../../src/lib/protocol/duration.js';
import { sumFromDigest, sumToHex } from '../../../../src/lib/protocol/fragment.js';
import {
  CompressionCodec,
  Status,
  type Fragment,
  type JournalSpec_Fragment,
  type LabelSet,
} from '../../../../src/lib/protocol/gen/broker/protocol.js';

const dir = mkdtempSync(join(tmpdir(), 'spool-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const J = 'a/journal';
const REGS: LabelSet = { labels: [{ name: 'reg', value: '1', prefix: false }] };
const sha1 = (s: string | Buffer) => createHash('sha1').update(s).digest();

function frag(begin: bigint, end: bigint, content: string, codec = CompressionCodec.NONE): Fragment {
  return {
    journal: J,
    begin,
    end,
    sum: begin === end ? { part1: 0n, part2: 0n, part3: 0 } : sumFromDigest(sha1(content)),
    compression_codec: codec,
    backing_store: '',
    mod_time: 0n,
    path_postfix: '',
  };
}

function spec(over: Partial<JournalSpec_Fragment> = {}): JournalSpec_Fragment {
  return {
    length: 100n,
    compression_codec: CompressionCodec.GZIP,
    stores: [],
    refresh_interval: nanosToDuration(60_000_000_000n),
    retention: undefined,
    flush_interval: undefined,
    path_postfix_template: '',
    ...over,
  };
}

async function collect(r: NodeJS.ReadableStream): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of r) parts.push(Buffer.from(c as Buffer));
  return Buffer.concat(parts).toString();
}

describe('Spool', () => {
  it('starts empty at 0 with codec NONE and rolls to a proposal beyond it', () => {
    const s = new Spool(J, { dir });
    assert.equal(s.begin, 0n);
    assert.equal(s.codec, CompressionCodec.NONE);
    const r = s.applyProposal(frag(10n, 10n, '', CompressionCodec.GZIP), REGS);
    assert.deepEqual(r, { status: Status.OK, committed: false });
    assert.equal(s.begin, 10n);
    assert.equal(s.codec, CompressionCodec.GZIP);
    assert.deepEqual(s.registers, REGS);
  });

  it('commits staged content when the proposal matches next()', () => {
    const commits: LocalFragment[] = [];
    const s = new Spool(J, { dir, observer: { onCommit: (lf) => commits.push(lf) }, now: () => new Date(Date.UTC(2024, 0, 2, 3)) });
    s.applyProposal(frag(5n, 5n, ''), REGS);
    s.apply(Buffer.from('hello '), 0);
    s.apply(Buffer.from('world'), 6);
    assert.equal(s.staged, 11);
    assert.equal(s.end, 5n, 'staged bytes are not part of the fragment');
    const next = s.next();
    assert.ok(fragmentEquals(next, frag(5n, 16n, 'hello world')));
    const r = s.applyProposal(next, REGS);
    assert.deepEqual(r, { status: Status.OK, committed: true });
    assert.equal(s.end, 16n);
    assert.equal(sumToHex(s.fragment.sum), sha1('hello world').toString('hex'));
    assert.equal(s.firstAppendTime?.toISOString(), '2024-01-02T03:00:00.000Z');
    assert.equal(commits.length, 1);
    assert.equal(readLocal(commits[0]!, 5n, 100).toString(), 'hello world');
    assert.equal(s.read(11n, 3).toString(), 'wor');
  });

  it('rolls back staged content on a proposal equal to the current fragment', () => {
    const s = new Spool(J, { dir });
    s.applyProposal(frag(0n, 0n, ''), REGS);
    s.apply(Buffer.from('abc'));
    s.applyProposal(s.next(), REGS);
    s.apply(Buffer.from('junk'), 0);
    const r = s.applyProposal(frag(0n, 3n, 'abc'), REGS);
    assert.deepEqual(r, { status: Status.OK, committed: false });
    assert.equal(s.staged, 0);
    // The running sum is back at the committed state: new content extends 'abc'.
    s.apply(Buffer.from('def'), 0);
    assert.ok(fragmentEquals(s.next(), frag(0n, 6n, 'abcdef')));
    assert.equal(s.applyProposal(s.next(), REGS).status, Status.OK);
    assert.equal(s.read(0n, 10).toString(), 'abcdef');
  });

  it('answers a mismatch with its fragment and registers', () => {
    const s = new Spool(J, { dir });
    // A sync at the spool's own (empty) offset does not take the proposal's registers.
    const sync = s.applyProposal(frag(0n, 0n, ''), REGS);
    assert.equal(sync.status, Status.PROPOSAL_MISMATCH);
    s.setRegisters(REGS);
    assert.equal(s.applyProposal(frag(0n, 0n, ''), REGS).status, Status.OK);
    s.apply(Buffer.from('abc'));
    const r = s.applyProposal(frag(0n, 3n, 'abd'), REGS);
    assert.equal(r.status, Status.PROPOSAL_MISMATCH);
    if (r.status !== Status.PROPOSAL_MISMATCH) return;
    assert.ok(fragmentEquals(r.fragment, frag(0n, 0n, '')));
    assert.deepEqual(r.registers, REGS);
    // Different registers with the same fragment also mismatch.
    const r2 = s.applyProposal(frag(0n, 0n, ''), { labels: [] });
    assert.equal(r2.status, Status.PROPOSAL_MISMATCH);
  });

  it('rejects content with the wrong delta', () => {
    const s = new Spool(J, { dir });
    s.apply(Buffer.from('abc'), 0);
    assert.throws(() => s.apply(Buffer.from('x'), 0), SpoolDeltaError);
  });

  it('hands out the completed fragment when a proposal rolls it, and starts anew', async () => {
    const done: LocalFragment[] = [];
    const s = new Spool(J, { dir, observer: { onComplete: (lf) => done.push(lf) } });
    s.applyProposal(frag(0n, 0n, ''), REGS);
    s.apply(Buffer.from('first fragment'));
    s.applyProposal(s.next(), REGS);
    const r = s.applyProposal(frag(14n, 14n, '', CompressionCodec.SNAPPY), REGS);
    assert.equal(r.status, Status.OK);
    assert.ok(r.completed);
    assert.equal(done.length, 1);
    assert.ok(fragmentEquals(done[0]!.fragment, frag(0n, 14n, 'first fragment')));
    assert.equal(await collect(streamLocal(done[0]!)), 'first fragment');
    assert.equal(await collect(streamLocal(done[0]!, 6n)), 'fragment');
    assert.equal(s.begin, 14n);
    assert.equal(s.contentLength, 0n);
    assert.equal(s.codec, CompressionCodec.SNAPPY);
    assert.equal(s.firstAppendTime, undefined);
    // The old content stays readable after the spool moved on.
    s.apply(Buffer.from('second'));
    s.applyProposal(s.next(), REGS);
    assert.equal(readLocal(done[0]!, 0n, 5).toString(), 'first');
    assert.equal(s.read(14n, 100).toString(), 'second');
  });

  it('rolls past staged content when a proposal is beyond it (a peer is ahead)', () => {
    const s = new Spool(J, { dir });
    s.applyProposal(frag(0n, 0n, ''), REGS);
    s.apply(Buffer.from('abc'));
    const other: LabelSet = { labels: [{ name: 'reg', value: '2', prefix: false }] };
    const r = s.applyProposal(frag(50n, 50n, ''), other);
    assert.deepEqual(r, { status: Status.OK, committed: false });
    assert.equal(s.begin, 50n);
    assert.equal(s.staged, 0);
    assert.deepEqual(s.registers, other);
  });

  it('roll() closes the spool where it is', () => {
    const s = new Spool(J, { dir });
    assert.equal(s.roll(), undefined, 'nothing to hand out when empty');
    s.apply(Buffer.from('xyz'));
    s.applyProposal(s.next(), REGS);
    const lf = s.roll(CompressionCodec.ZSTANDARD);
    assert.ok(lf);
    assert.equal(lf.fragment.end, 3n);
    assert.equal(s.begin, 3n);
    assert.equal(s.codec, CompressionCodec.ZSTANDARD);
  });

  it('leaves no files in its directory (spool files are unlinked)', () => {
    const s = new Spool(J, { dir });
    s.apply(Buffer.from('content'));
    assert.deepEqual(readdirSync(dir), []);
  });

  it('closes spool files that nothing refers to any more (in a child with --expose-gc)', () => {
    const spoolJs = fileURLToPath(new URL('../../../../src/core/fragment/spool.js', import.meta.url));
    const script = `
      const { Spool, spoolStats } = await import(${JSON.stringify(spoolJs)});
      const make = () => {
        const s = new Spool('j');
        s.apply(Buffer.alloc(1000, 1));
        s.applyProposal(s.next(), { labels: [] });
        return s.roll();
      };
      const kept = make();
      const drop = () => {
        for (let i = 0; i < 19; i++) make();
      };
      drop();
      const before = spoolStats.openFiles;
      for (let i = 0; i < 100 && spoolStats.openFiles > 1; i++) {
        globalThis.gc();
        await new Promise((r) => setImmediate(r));
      }
      console.log(JSON.stringify({ before, after: spoolStats.openFiles, bytes: spoolStats.bytesOnDisk, kept: kept.file.isClosed }));
    `;
    const out = JSON.parse(execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8' }));
    assert.equal(out.before, 20);
    assert.deepEqual({ after: out.after, bytes: out.bytes, kept: out.kept }, { after: 1, bytes: 1000, kept: false });
  });

  it('refuses reads of a closed spool file', () => {
    const s = new Spool(J, { dir });
    s.apply(Buffer.from('abc'));
    s.applyProposal(s.next(), REGS);
    const lf = s.roll()!;
    lf.file!.close();
    assert.throws(() => readLocal(lf, 0n, 3), SpoolFileClosedError);
    lf.file!.close(); // idempotent
  });

  it('readLocal refuses offsets outside the fragment', () => {
    const s = new Spool(J, { dir });
    s.apply(Buffer.from('abc'));
    s.applyProposal(s.next(), REGS);
    assert.throws(() => s.read(4n, 1), RangeError);
    assert.equal(s.read(3n, 1).length, 0);
  });
});

describe('Spool with asyncWrites', () => {
  it('has the staged content in the file once settled, in the order it was written', async () => {
    const s = new Spool(J, { dir, asyncWrites: true });
    s.applyProposal(frag(0n, 0n, ''), REGS);
    // Many writes in flight at once, then a roll-back and different bytes at the same offsets:
    // the later bytes must win.
    const junk = Buffer.alloc(64 * 1024, 'x');
    for (let i = 0; i < 16; i++) s.apply(junk);
    s.rollback();
    const parts = Array.from({ length: 16 }, (_, i) => Buffer.alloc(64 * 1024, 97 + i));
    for (const p of parts) s.apply(p);
    await s.settled();
    const want = Buffer.concat(parts);
    assert.ok(fragmentEquals(s.next(), frag(0n, BigInt(want.length), want.toString('latin1'))));
    assert.deepEqual(s.applyProposal(s.next(), REGS), { status: Status.OK, committed: true });
    assert.ok(s.read(0n, want.length).equals(want));
    // Nothing pending: settled() resolves at once, and so it does on a spool without a file.
    await s.settled();
    await new Spool(J, { dir, asyncWrites: true }).settled();
  });

  it('says when its writes are behind by more than a bound, and when they caught up', async () => {
    const s = new Spool(J, { dir, asyncWrites: true });
    assert.equal(s.writesBehind(0), undefined, 'no file yet');
    s.apply(Buffer.alloc(1000, 'a'));
    s.apply(Buffer.alloc(1000, 'b'), 1000);
    assert.equal(s.writesBehind(2000), undefined);
    const behind = s.writesBehind(1500);
    assert.ok(behind);
    await behind;
    assert.equal(s.writesBehind(0), undefined);
    await s.settled();
    assert.equal(s.applyProposal(s.next(), REGS).status, Status.OK);
    assert.equal(s.read(999n, 2).toString(), 'ab');
  });

  it('reports a failed write from settled(), once', async () => {
    const s = new Spool(J, { dir, asyncWrites: true });
    s.apply(Buffer.from('abc'));
    await s.settled();
    const lf = s.local();
    // Close the descriptor behind the file's back so the next write fails (EBADF).
    const { closeSync } = await import('node:fs');
    const file = (s as unknown as { file: { fd: number; h: { closed: boolean } } }).file;
    closeSync(file.fd);
    s.apply(Buffer.from('def'), 3);
    await assert.rejects(s.settled(), /EBADF/);
    await s.settled();
    assert.ok(lf);
    // Its number may be another file's by now: never close it again.
    file.h.closed = true;
  });

  it('closes a file with writes in flight only once they are done', async () => {
    const s = new Spool(J, { dir, asyncWrites: true });
    s.apply(Buffer.from('abc'));
    assert.equal(s.staged, 3);
    const settled = s.settled();
    const lf = s.local();
    const file = (s as unknown as { file: { close(): void; pendingWrites: boolean; isClosed: boolean } }).file;
    assert.equal(file.pendingWrites, true);
    file.close();
    assert.equal(file.isClosed, false, 'the descriptor stays open while a write uses it');
    await settled;
    assert.equal(file.isClosed, true);
    assert.throws(() => s.apply(Buffer.from('d'), 3), SpoolFileClosedError);
    assert.ok(lf);
  });
});

describe('roll rules', () => {
  const at = (iso: string) => new Date(iso);
  function view(begin: bigint, end: bigint, first: Date | undefined, codec = CompressionCodec.GZIP) {
    return { journal: J, fragment: { ...frag(begin, end, 'x'), compression_codec: codec }, firstAppendTime: first };
  }

  it('rolls an empty spool (to pick up the codec)', () => {
    assert.equal(rollReason(view(5n, 5n, undefined), spec()), 'empty');
    const p = nextProposal(view(5n, 5n, undefined, CompressionCodec.NONE), spec());
    assert.ok(fragmentEquals(p, frag(5n, 5n, '', CompressionCodec.GZIP)));
  });

  it('rolls on length, only once over it', () => {
    assert.equal(rollReason(view(0n, 100n, at('2024-01-01T00:00:00Z')), spec()), undefined);
    assert.equal(rollReason(view(0n, 101n, at('2024-01-01T00:00:00Z')), spec()), 'length');
  });

  it('rolls to a larger offset a peer asks for', () => {
    const v = view(0n, 10n, at('2024-01-01T00:00:00Z'));
    assert.equal(rollReason(v, spec(), { rollToOffset: 0n }), undefined);
    assert.equal(rollReason(v, spec(), { rollToOffset: 30n }), 'offset');
    assert.equal(nextProposal(v, spec(), { rollToOffset: 30n }).begin, 30n);
    assert.throws(() => nextProposal(v, spec(), { rollToOffset: 5n }), RangeError);
  });

  it('rolls when the UTC-aligned flush interval changes', () => {
    const hourly = spec({ flush_interval: nanosToDuration(3600n * 1_000_000_000n) });
    const v = view(0n, 10n, at('2024-01-01T10:59:59Z'));
    assert.equal(rollReason(v, hourly, { now: at('2024-01-01T10:59:59.900Z') }), undefined);
    assert.equal(rollReason(v, hourly, { now: at('2024-01-01T11:00:00Z') }), 'flush-interval');
    const daily = spec({ flush_interval: nanosToDuration(86400n * 1_000_000_000n) });
    const d = view(0n, 10n, at('2024-01-01T00:00:00Z'));
    assert.equal(rollReason(d, daily, { now: at('2024-01-01T23:59:59Z') }), undefined);
    assert.equal(rollReason(d, daily, { now: at('2024-01-02T00:00:00Z') }), 'flush-interval');
    assert.equal(rollReason(d, spec(), { now: at('2030-01-01T00:00:00Z') }), undefined, 'no interval, no roll');
  });

  it('rolls on a codec change and on demand', () => {
    const v = view(0n, 10n, at('2024-01-01T00:00:00Z'), CompressionCodec.SNAPPY);
    assert.equal(rollReason(v, spec()), 'codec');
    assert.equal(nextProposal(v, spec()).compression_codec, CompressionCodec.GZIP);
    const w = view(0n, 10n, at('2024-01-01T00:00:00Z'));
    assert.equal(rollReason(w, spec(), { flush: true }), 'flush');
    assert.ok(fragmentEquals(nextProposal(w, spec()), w.fragment), 'no reason: the fragment as it is');
  });
});
