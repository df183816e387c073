import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { fragmentObjectFromListing, type FragmentObject } from '../../../../src/lib/fragment/objects.js';
import { planRetention, planRetentionAll } from '../../../../src/lib/fragment/retention.js';
import { parseGoDuration } from '../../../../src/lib/protocol/duration.js';

const J = 'acme/events';
const S1 = 's3://bucket-one/gazette/';
const S2 = 'file:///mnt/backup/';
const NOW_S = 1_700_000_000;
const NOW_MS = NOW_S * 1000;
const HOUR = 3600;
const SUM = 'aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d';

const hex16 = (n: number): string => n.toString(16).padStart(16, '0');

function obj(begin: number, end: number, ageSeconds: number, o: { store?: string; size?: number; journal?: string; mod?: number } = {}): FragmentObject {
  return fragmentObjectFromListing(
    o.journal ?? J,
    o.store ?? S1,
    `${hex16(begin)}-${hex16(end)}-${SUM}.raw`,
    o.size ?? end - begin,
    o.mod ?? NOW_S - ageSeconds,
  );
}

const ids = (os: FragmentObject[]): string[] => os.map((o) => `${o.store}${o.path}`);

describe('planRetention', () => {
  const old = [obj(0, 100, 50 * HOUR), obj(100, 200, 30 * HOUR), obj(200, 300, 10 * HOUR), obj(300, 400, 1 * HOUR)];

  it('expires objects at or past the retention, keeps younger ones', () => {
    const p = planRetention(J, old, parseGoDuration('24h'), NOW_MS);
    assert.deepEqual(ids(p.expired), ids(old.slice(0, 2)));
    assert.equal(p.count, 2);
    assert.equal(p.bytes, 200);
    assert.deepEqual(p.byStore, [{ store: S1, count: 2, bytes: 200 }]);
    assert.equal(p.cutoff, NOW_S - 24 * HOUR);
    assert.deepEqual(p.keptNewest, []);
  });

  it('an age exactly equal to the retention has expired; one second younger has not', () => {
    const at = obj(0, 10, 24 * HOUR);
    const younger = obj(10, 20, 24 * HOUR - 1);
    const p = planRetention(J, [at, younger, obj(20, 30, 0)], parseGoDuration('24h'), NOW_MS);
    assert.deepEqual(ids(p.expired), ids([at]));
  });

  it('a retention of 0 or none keeps everything', () => {
    for (const r of [0n, undefined]) {
      const p = planRetention(J, old, r, NOW_MS);
      assert.deepEqual(p.expired, []);
      assert.equal(p.count, 0);
      assert.equal(p.bytes, 0);
      assert.deepEqual(p.byStore, []);
      assert.equal(p.cutoff, undefined);
    }
  });

  it('an idle journal keeps the fragment holding its newest content, in every store', () => {
    const last1 = obj(300, 400, 90 * HOUR);
    const last2 = obj(300, 400, 95 * HOUR, { store: S2 });
    const objects = [obj(0, 100, 99 * HOUR), obj(100, 300, 98 * HOUR), last1, last2];
    const p = planRetention(J, objects, parseGoDuration('1h'), NOW_MS);
    assert.equal(p.newestEnd, 400n);
    assert.deepEqual(ids(p.expired), ids(objects.slice(0, 2)));
    assert.deepEqual(ids(p.keptNewest).sort(), ids([last1, last2]).sort());
  });

  it('every object ending at the newest end is kept, even a shorter one', () => {
    const tail = obj(350, 400, 90 * HOUR);
    const p = planRetention(J, [obj(0, 400, 90 * HOUR), tail, obj(0, 350, 90 * HOUR)], parseGoDuration('1h'), NOW_MS);
    assert.deepEqual(ids(p.expired), ids([obj(0, 350, 90 * HOUR)]));
    assert.equal(p.keptNewest.length, 2);
  });

  it('copies in several stores age separately and are totalled per store', () => {
    const a1 = obj(0, 100, 48 * HOUR, { size: 40 });
    const a2 = obj(0, 100, 2 * HOUR, { store: S2, size: 45 });
    const b1 = obj(100, 200, 48 * HOUR, { size: 30 });
    const b2 = obj(100, 200, 48 * HOUR, { store: S2, size: 35 });
    const c = obj(200, 300, 48 * HOUR);
    const p = planRetention(J, [a1, a2, b1, b2, c], parseGoDuration('24h'), NOW_MS);
    assert.deepEqual(ids(p.expired), ids([b2, a1, b1])); // ordered by store, then path
    assert.deepEqual(p.byStore, [
      { store: S2, count: 1, bytes: 35 },
      { store: S1, count: 2, bytes: 70 },
    ].sort((x, y) => (x.store < y.store ? -1 : 1)));
    assert.equal(p.count, 3);
    assert.equal(p.bytes, 105);
  });

  it('objects with an unknown modification time are kept', () => {
    const unknown = obj(0, 100, 0, { mod: 0 });
    const p = planRetention(J, [unknown, obj(100, 200, 0)], parseGoDuration('1s'), NOW_MS);
    assert.deepEqual(p.expired, []);
  });

  it('a retention longer than the epoch expires nothing', () => {
    const p = planRetention(J, old, parseGoDuration('1000000h'), NOW_MS);
    assert.deepEqual(p.expired, []);
    assert.equal(p.cutoff, -1);
  });

  it('an empty journal plans nothing', () => {
    const p = planRetention(J, [], parseGoDuration('1h'), NOW_MS);
    assert.deepEqual([p.count, p.bytes, p.expired.length, p.newestEnd], [0, 0, 0, 0n]);
  });

  it('rejects objects of another journal', () => {
    assert.throws(() => planRetention(J, [obj(0, 1, 0, { journal: 'other/j' })], 0n, NOW_MS), /belongs to journal other\/j/);
  });
});

describe('planRetentionAll', () => {
  it('applies each journal its own retention and totals per store', () => {
    const a = [obj(0, 100, 10 * HOUR, { journal: 'aa/j' }), obj(100, 200, 10 * HOUR, { journal: 'aa/j' })];
    const b = [
      obj(0, 100, 10 * HOUR, { journal: 'bb/j', store: S2 }),
      obj(100, 200, 10 * HOUR, { journal: 'bb/j' }),
      obj(200, 300, 10 * HOUR, { journal: 'bb/j' }),
    ];
    const c = [obj(0, 100, 99 * HOUR, { journal: 'cc/j' }), obj(100, 200, 99 * HOUR, { journal: 'cc/j' })];
    const plan = planRetentionAll(
      [
        { journal: 'bb/j', objects: b, retention: parseGoDuration('1h') },
        { journal: 'aa/j', objects: a, retention: parseGoDuration('24h') },
        { journal: 'cc/j', objects: c },
      ],
      NOW_MS,
    );
    assert.deepEqual(plan.journals.map((j) => [j.journal, j.count]), [['aa/j', 0], ['bb/j', 2], ['cc/j', 0]]);
    assert.deepEqual(plan.byStore, [
      { store: S2, count: 1, bytes: 100 },
      { store: S1, count: 1, bytes: 100 },
    ].sort((x, y) => (x.store < y.store ? -1 : 1)));
    assert.equal(plan.count, 2);
    assert.equal(plan.bytes, 200);
  });
});
