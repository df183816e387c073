import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';

import {
  forksReport,
  forksReportJson,
  planForks,
  planForksAll,
  type ForkKind,
  type JournalForks,
} from '../../../../src/lib/fragment/forks.js';
import { fragmentObjectFromListing, groupByJournal, type FragmentObject } from '../../../../src/lib/fragment/objects.js';

const J = 'acme/events';
const S1 = 's3://bucket-one/gazette/';
const S2 = 'file:///mnt/backup/';

const hex16 = (n: number | bigint): string => BigInt(n).toString(16).padStart(16, '0');
/** Tests name sums by a short tag; the sum is the tag's SHA-1 (tags are read back from it). */
const tags = new Map<string, string>();
function sum(tag: string): string {
  const hex = createHash('sha1').update(tag).digest('hex');
  tags.set(hex, tag);
  return hex;
}

interface ObjOpts {
  store?: string;
  postfix?: string;
  size?: number;
  mod?: number;
  journal?: string;
}

/** One stored object, built through the listing parser as a store listing would be. */
function obj(begin: number | bigint, end: number | bigint, s: string, o: ObjOpts = {}): FragmentObject {
  const name = `${hex16(begin)}-${hex16(end)}-${sum(s)}.gz`;
  const rel = o.postfix ? `${o.postfix}/${name}` : name;
  return fragmentObjectFromListing(o.journal ?? J, o.store ?? S1, rel, o.size ?? 1000, o.mod ?? 1_700_000_000);
}

const id = (o: FragmentObject): string => `${o.store}${o.path}`;
type R = [number, number, string];

interface Expect {
  chain: [number, number];
  members: R[];
  deadEnd?: FragmentObject[];
  gap?: FragmentObject[];
  ambiguous?: FragmentObject[];
  /** Whether the journal as a whole is ambiguous (default: when ambiguous forks are expected). */
  ambiguousJournal?: boolean;
}

/** Asserts exactly the expected chain and forks of each kind, and the deletable invariants. */
function check(r: JournalForks, want: Expect): void {
  assert.deepEqual([r.chain.begin, r.chain.end], want.chain.map(BigInt));
  assert.deepEqual(
    r.members.map((m) => [Number(m.begin), Number(m.end), tags.get(m.sum)]),
    want.members,
  );
  const ofKind = (k: ForkKind): string[] => r.forks.filter((f) => f.kind === k).map((f) => id(f.object)).sort();
  assert.deepEqual(ofKind('dead-end'), (want.deadEnd ?? []).map(id).sort(), 'dead-end forks');
  assert.deepEqual(ofKind('gap'), (want.gap ?? []).map(id).sort(), 'gap forks');
  assert.deepEqual(ofKind('ambiguous'), (want.ambiguous ?? []).map(id).sort(), 'ambiguous forks');
  assert.equal(r.ambiguous !== undefined, want.ambiguousJournal ?? (want.ambiguous ?? []).length > 0, 'journal ambiguity');

  // Only dead-ends of unambiguous journals are deletable, and nothing on the chain ever is.
  const chainIds = new Set(r.members.flatMap((m) => m.copies.map(id)));
  const del = r.deletable.map(id).sort();
  assert.deepEqual(del, r.ambiguous === undefined ? ofKind('dead-end') : []);
  for (const d of del) assert.ok(!chainIds.has(d), `chain object ${d} is deletable`);
  for (const f of r.forks) {
    assert.ok(!chainIds.has(id(f.object)), `chain object ${id(f.object)} reported as a fork`);
    assert.equal(f.deletable, f.kind === 'dead-end');
    assert.ok(f.reason.length > 0);
  }
}

describe('planForks', () => {
  it('an empty journal has an empty chain and no forks', () => {
    const r = planForks(J, []);
    check(r, { chain: [0, 0], members: [] });
    assert.equal(r.ambiguous, undefined);
  });

  it('a clean linear journal has no forks', () => {
    const r = planForks(J, [obj(200, 300, 'c'), obj(0, 100, 'a'), obj(100, 200, 'b')]);
    check(r, { chain: [0, 300], members: [[0, 100, 'a'], [100, 200, 'b'], [200, 300, 'c']] });
  });

  it('a superseded shorter copy with the same begin is a dead-end', () => {
    const short = obj(0, 60, 'd');
    const r = planForks(J, [obj(0, 100, 'a'), short, obj(100, 200, 'b')]);
    check(r, { chain: [0, 200], members: [[0, 100, 'a'], [100, 200, 'b']], deadEnd: [short] });
    assert.match(r.forks[0]!.reason, /^superseded/);
    assert.equal(r.forks[0]!.divergesAt, 0n);
  });

  it('divergent writes over offsets the chain holds are dead-ends', () => {
    const inside = obj(120, 180, 'x');
    const sameBegin = obj(100, 170, 'y');
    const r = planForks(J, [obj(0, 100, 'a'), obj(100, 200, 'b'), inside, sameBegin, obj(200, 300, 'c')]);
    check(r, { chain: [0, 300], members: [[0, 100, 'a'], [100, 200, 'b'], [200, 300, 'c']], deadEnd: [inside, sameBegin] });
    const byBegin = new Map(r.forks.map((f) => [f.object.begin, f]));
    assert.match(byBegin.get(120n)!.reason, /inside chain fragment \[100, 200\)/);
    assert.equal(byBegin.get(120n)!.divergesAt, 120n);
  });

  it('a fragment straddling two chain fragments is a dead-end', () => {
    const straddle = obj(50, 150, 'p');
    const r = planForks(J, [obj(0, 100, 'a'), obj(100, 200, 'b'), straddle]);
    check(r, { chain: [0, 200], members: [[0, 100, 'a'], [100, 200, 'b']], deadEnd: [straddle] });
    assert.match(r.forks[0]!.reason, /overlaps chain fragments \[0, 100\) to \[100, 200\)/);
  });

  it('a fork from offset 0 ending inside the chain is a dead-end', () => {
    const fromZero = obj(0, 150, 'f');
    const r = planForks(J, [obj(0, 100, 'a'), obj(100, 200, 'b'), obj(200, 250, 'c'), fromZero]);
    check(r, { chain: [0, 250], members: [[0, 100, 'a'], [100, 200, 'b'], [200, 250, 'c']], deadEnd: [fromZero] });
    assert.equal(r.forks[0]!.divergesAt, 0n);
  });

  it('a chain step takes the fragment reaching furthest back', () => {
    const late = obj(50, 100, 'l');
    const r = planForks(J, [obj(0, 100, 'a'), late, obj(100, 200, 'b')]);
    check(r, { chain: [0, 200], members: [[0, 100, 'a'], [100, 200, 'b']], deadEnd: [late] });
  });

  it('ties at the greatest end start from the smallest begin', () => {
    const tail = obj(100, 200, 't');
    const r = planForks(J, [tail, obj(0, 200, 'w')]);
    check(r, { chain: [0, 200], members: [[0, 200, 'w']], deadEnd: [tail] });
  });

  it('an older run separated by missing offsets is all gap forks, never deleted', () => {
    const old1 = obj(0, 100, 'a');
    const old2 = obj(100, 200, 'b');
    const r = planForks(J, [old1, old2, obj(300, 400, 'c'), obj(400, 500, 'd')]);
    check(r, { chain: [300, 500], members: [[300, 400, 'c'], [400, 500, 'd']], gap: [old1, old2] });
    assert.deepEqual(r.deletable, []);
    for (const f of r.forks) {
      assert.match(f.reason, /before the chain's begin 300/);
      assert.equal(f.divergesAt, 300n);
    }
  });

  it('a fragment reaching before the chain begin is a gap, even when it overlaps the chain', () => {
    const early = obj(0, 160, 'e');
    const r = planForks(J, [early, obj(150, 200, 'a'), obj(200, 300, 'b')]);
    check(r, { chain: [150, 300], members: [[150, 200, 'a'], [200, 300, 'b']], gap: [early] });
    assert.match(r.forks[0]!.reason, /offsets \[0, 150\) before the chain's begin 150/);
    assert.equal(r.forks[0]!.divergesAt, 150n);
  });

  it('copies in a second store are the same fragment: chain copies and fork copies', () => {
    const a1 = obj(0, 100, 'a');
    const a2 = obj(0, 100, 'a', { store: S2 });
    const d1 = obj(0, 40, 'd');
    const d2 = obj(0, 40, 'd', { store: S2 });
    const r = planForks(J, [a1, d1, a2, d2, obj(100, 200, 'b', { store: S2 })]);
    check(r, { chain: [0, 200], members: [[0, 100, 'a'], [100, 200, 'b']], deadEnd: [d1, d2] });
    assert.deepEqual(r.members[0]!.copies.map(id).sort(), [a1, a2].map(id).sort());
  });

  it('copies under path postfixes are the same fragment', () => {
    const plain = obj(0, 100, 'a');
    const post = obj(0, 100, 'a', { postfix: 'date=2024-01-01' });
    const fork = obj(100, 150, 'z', { postfix: 'date=2024-01-02' });
    const r = planForks(J, [plain, post, obj(100, 200, 'b', { postfix: 'date=2024-01-02' }), fork]);
    check(r, { chain: [0, 200], members: [[0, 100, 'a'], [100, 200, 'b']], deadEnd: [fork] });
    assert.equal(r.members[0]!.copies.length, 2);
    assert.equal(post.path, `${J}/date=2024-01-01/${hex16(0)}-${hex16(100)}-${sum('a')}.gz`);
  });

  it('two sums for one chain step make the journal ambiguous: nothing deletable', () => {
    const a = obj(0, 100, 'a');
    const b = obj(0, 100, 'b');
    const short = obj(100, 150, 's');
    const r = planForks(J, [a, b, obj(100, 200, 'c'), short]);
    // The chain still names one of the two (the smaller sum), but the journal is ambiguous.
    const [kept, other] = a.sum < b.sum ? [a, b] : [b, a];
    check(r, { chain: [0, 200], members: [[0, 100, tags.get(kept.sum)!], [100, 200, 'c']], ambiguous: [other, short] });
    assert.match(r.ambiguous!, /\[0, 100\) with different sums/);
    assert.deepEqual(r.deletable, []);
  });

  it('two sums for the newest fragment make the journal ambiguous', () => {
    const x = obj(100, 200, 'e');
    const y = obj(100, 200, 'f');
    const r = planForks(J, [obj(0, 100, 'a'), y, x]);
    const [kept, other] = x.sum < y.sum ? [x, y] : [y, x];
    check(r, { chain: [0, 200], members: [[0, 100, 'a'], [100, 200, tags.get(kept.sum)!]], ambiguous: [other] });
  });

  it('two sums for one range off the chain are plain dead-ends', () => {
    const p = obj(0, 100, 'a');
    const q = obj(0, 100, 'b');
    const r = planForks(J, [obj(0, 200, 'w'), p, q]);
    check(r, { chain: [0, 200], members: [[0, 200, 'w']], deadEnd: [p, q] });
    assert.equal(r.ambiguous, undefined);
  });

  it('a chain past the broker write head is ambiguous, pointing at reset-head', () => {
    const fork = obj(100, 150, 's');
    const objects = [obj(0, 100, 'a'), obj(100, 200, 'b'), fork];
    const r = planForks(J, objects, { writeHead: 150n });
    check(r, { chain: [0, 200], members: [[0, 100, 'a'], [100, 200, 'b']], ambiguous: [fork] });
    assert.match(r.ambiguous!, /past the broker's write head 150; run reset-head/);

    // A write head at or beyond the chain's end is the normal case.
    const ok = planForks(J, objects, { writeHead: 200n });
    check(ok, { chain: [0, 200], members: [[0, 100, 'a'], [100, 200, 'b']], deadEnd: [fork] });
    check(planForks(J, objects, { writeHead: 260n }), { chain: [0, 200], members: [[0, 100, 'a'], [100, 200, 'b']], deadEnd: [fork] });
  });

  it('a chain past the write head is ambiguous even without forks', () => {
    const r = planForks(J, [obj(0, 100, 'a')], { writeHead: 0n });
    check(r, { chain: [0, 100], members: [[0, 100, 'a']], ambiguousJournal: true });
    assert.match(r.ambiguous!, /reset-head/);
  });

  it('empty fragments are dead-ends inside the chain and gaps outside it', () => {
    const inside = obj(100, 100, 'e');
    const past = obj(400, 400, 'e');
    const r = planForks(J, [obj(0, 100, 'a'), obj(100, 200, 'b'), inside, past]);
    check(r, { chain: [0, 200], members: [[0, 100, 'a'], [100, 200, 'b']], deadEnd: [inside], gap: [past] });
    const onlyEmpty = obj(5, 5, 'e');
    check(planForks(J, [onlyEmpty]), { chain: [0, 0], members: [], gap: [onlyEmpty] });
  });

  it('a mixed journal: superseded, divergent, straddling and gap forks at once', () => {
    const gapOld = obj(0, 50, 'g');
    const sup = obj(100, 120, 's');
    const div = obj(130, 190, 'v', { store: S2 });
    const strad = obj(180, 260, 't');
    const r = planForks(J, [
      gapOld,
      obj(60, 100, 'a'),
      obj(100, 200, 'b'),
      obj(200, 300, 'c'),
      obj(200, 300, 'c', { store: S2 }),
      sup,
      div,
      strad,
    ]);
    check(r, {
      chain: [60, 300],
      members: [[60, 100, 'a'], [100, 200, 'b'], [200, 300, 'c']],
      deadEnd: [sup, div, strad],
      gap: [gapOld],
    });
    // Forks are ordered by begin, end, sum, store, path.
    assert.deepEqual(r.forks.map((f) => Number(f.object.begin)), [0, 100, 130, 180]);
  });

  it('one sum at different offsets is different fragments, not copies', () => {
    const a0 = obj(0, 100, 'a');
    const a1 = obj(100, 200, 'a');
    const aShort = obj(0, 50, 'a');
    const aCopy = obj(100, 200, 'a', { store: S2 });
    const r = planForks(J, [a0, a1, aShort, aCopy]);
    check(r, { chain: [0, 200], members: [[0, 100, 'a'], [100, 200, 'a']], deadEnd: [aShort] });
    assert.deepEqual(r.members[1]!.copies.map(id).sort(), [a1, aCopy].map(id).sort());
  });

  it('rejects objects of another journal', () => {
    assert.throws(() => planForks(J, [obj(0, 1, 'a', { journal: 'other/j' })]), /belongs to journal other\/j/);
  });
});

describe('planForksAll and the report', () => {
  it('plans each journal of a flat listing with its own write head', () => {
    const listing = [
      obj(0, 100, 'a', { journal: 'bb/j' }),
      obj(0, 50, 'd', { journal: 'bb/j' }),
      obj(0, 100, 'a', { journal: 'aa/j' }),
      obj(0, 50, 'd', { journal: 'aa/j' }),
    ];
    const res = planForksAll(groupByJournal(listing), new Map([['bb/j', 10n]]));
    assert.deepEqual(res.map((r) => r.journal), ['aa/j', 'bb/j']);
    assert.equal(res[0]!.ambiguous, undefined);
    assert.equal(res[0]!.deletable.length, 1);
    assert.match(res[1]!.ambiguous!, /reset-head/);
    assert.equal(res[1]!.deletable.length, 0);
  });

  it('renders the documented JSON shape with exact int64 offsets', () => {
    const big = (1n << 62n) + 1n; // not exactly representable as a JS number
    const fork = obj(big, big + 10n, 'd', { size: 77, mod: 1_700_000_123 });
    const r = planForks(J, [obj(big, big + 100n, 'a'), fork]);
    const text = forksReportJson([r]);
    assert.equal(
      text,
      `{"journals":[{"journal":"${J}","chain":{"begin":${big},"end":${big + 100n}},"forks":[` +
        `{"kind":"dead-end","begin":${big},"end":${big + 10n},"sum":"${sum('d')}","store":"${S1}",` +
        `"path":"${fork.path}","size":77,"mod_time":1700000123,"diverges_at":${big},"deletable":true,` +
        `"reason":${JSON.stringify(r.forks[0]!.reason)}}]}]}`,
    );
    const amb = planForks(J, [obj(0, 10, 'a')], { writeHead: 1n });
    const rep = forksReport([amb]);
    assert.match(rep.journals[0]!.ambiguous!, /reset-head/);
    assert.deepEqual(rep.journals[0]!.forks, []);
    assert.deepEqual(JSON.parse(forksReportJson([amb])).journals[0].chain, { begin: 0, end: 10 });
  });
});
