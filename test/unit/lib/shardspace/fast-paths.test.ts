// The shard set's fast paths against plain references on random listings: hoisting
// (shardSetFromListing against the normalise-intersect-subtract reference below, which is how it
// was first written) and the streaming encoder (encodeShardSet and encodeShardSetBytes against
// encodeShardSetGeneric, the mappings-then-emitGoYaml encoder).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  encodeShardSet,
  encodeShardSetBytes,
  encodeShardSetGeneric,
  normalizeShardSpec,
  shardSetFromListing,
  type ShardSet,
  type ShardSetEntry,
} from '../../../../src/lib/shardspace/shardspace.js';
import { durationToNanos, nanosToDuration } from '../../../../src/lib/protocol/duration.js';
import type { Duration } from '../../../../src/lib/protocol/gen/google/protobuf/duration.js';
import type { ListResponse_Shard, ShardSpec, ShardSpec_Source } from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import { intersectLabels, subtractLabels } from '../../../../src/lib/protocol/labelsets.js';

function rng(seed: number) {
  let s = seed;
  const next = (n: number) => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s % n;
  };
  return { next, pick: <T>(xs: readonly T[]): T => xs[next(xs.length)]! };
}

// ---- the reference hoisting -------------------------------------------------------------------

const ns = (d: Duration | undefined) => durationToNanos(d);
const dur = (n: bigint) => (n === 0n ? undefined : nanosToDuration(n));
const labelsOf = (s: ShardSpec) => s.labels?.labels ?? [];
const sourcesEq = (a: readonly ShardSpec_Source[], b: readonly ShardSpec_Source[]) =>
  a.length === b.length && a.every((x, i) => x.journal === b[i]!.journal && x.min_offset === b[i]!.min_offset);

function refIntersect(a0: ShardSpec, b0: ShardSpec): ShardSpec {
  const a = normalizeShardSpec(a0);
  const b = normalizeShardSpec(b0);
  if (!sourcesEq(a.sources, b.sources)) a.sources = [];
  if (a.recovery_log_prefix !== b.recovery_log_prefix) a.recovery_log_prefix = '';
  if (a.hint_prefix !== b.hint_prefix) a.hint_prefix = '';
  if (a.hint_backups !== b.hint_backups) a.hint_backups = 0;
  if (ns(a.max_txn_duration) !== ns(b.max_txn_duration)) a.max_txn_duration = undefined;
  if (ns(a.min_txn_duration) !== ns(b.min_txn_duration)) a.min_txn_duration = undefined;
  if (a.disable !== b.disable) a.disable = false;
  if (a.hot_standbys !== b.hot_standbys) a.hot_standbys = 0;
  a.labels = { labels: intersectLabels(labelsOf(a), labelsOf(b)) };
  if (a.disable_wait_for_ack !== b.disable_wait_for_ack) a.disable_wait_for_ack = false;
  if (a.ring_buffer_size !== b.ring_buffer_size) a.ring_buffer_size = 0;
  if (a.read_channel_size !== b.read_channel_size) a.read_channel_size = 0;
  return a;
}

function refSubtract(a0: ShardSpec, b0: ShardSpec): ShardSpec {
  const a = normalizeShardSpec(a0);
  const b = normalizeShardSpec(b0);
  if (sourcesEq(a.sources, b.sources)) a.sources = [];
  if (a.recovery_log_prefix === b.recovery_log_prefix) a.recovery_log_prefix = '';
  if (a.hint_prefix === b.hint_prefix) a.hint_prefix = '';
  if (a.hint_backups === b.hint_backups) a.hint_backups = 0;
  if (ns(a.max_txn_duration) === ns(b.max_txn_duration)) a.max_txn_duration = undefined;
  if (ns(a.min_txn_duration) === ns(b.min_txn_duration)) a.min_txn_duration = undefined;
  if (a.disable === b.disable) a.disable = false;
  if (a.hot_standbys === b.hot_standbys) a.hot_standbys = 0;
  a.labels = { labels: subtractLabels(labelsOf(a), labelsOf(b)) };
  if (a.disable_wait_for_ack === b.disable_wait_for_ack) a.disable_wait_for_ack = false;
  if (a.ring_buffer_size === b.ring_buffer_size) a.ring_buffer_size = 0;
  if (a.read_channel_size === b.read_channel_size) a.read_channel_size = 0;
  return a;
}

function refFromListing(shards: readonly ListResponse_Shard[]): ShardSet {
  let common = normalizeShardSpec(undefined);
  shards.forEach((s, i) => {
    if (i === 0) common = { ...normalizeShardSpec(s.spec), id: '' };
    else common = refIntersect(common, normalizeShardSpec(s.spec));
  });
  common.id = '';
  return {
    common,
    shards: shards.map((s) => {
      const e: ShardSetEntry = { spec: refSubtract(normalizeShardSpec(s.spec), common) };
      e.spec.id = s.spec?.id ?? '';
      if (s.mod_revision !== 0n) e.revision = s.mod_revision;
      return e;
    }),
  };
}

// ---- random inputs ----------------------------------------------------------------------------

const STRINGS = ['', 'a', 'x y', 'true', 'null', '123', '1:20', "it's", '#c', '- d', 'line\nbreak', ' lead', 'é日本', '😀 x', `${'a'.repeat(90)} ${'b'.repeat(10)}`, '/gazette/hints', 'rec/logs'];

function randomDuration(r: ReturnType<typeof rng>): Duration | undefined {
  // Absent, zero, and equal lengths written differently (1.5s as 1s+5e8ns and as 0s+1.5e9ns).
  return r.pick([undefined, { seconds: 0n, nanos: 0 }, { seconds: 1n, nanos: 0 }, { seconds: 1n, nanos: 500_000_000 }, { seconds: 0n, nanos: 1_500_000_000 }, { seconds: -3n, nanos: -5 }]);
}

/** A spec drawn from few values, so that shards often share fields; sometimes partial. */
function randomSpec(r: ReturnType<typeof rng>, id: string): ShardSpec {
  const labels = [];
  for (let n = r.next(4); n > 0; n--) labels.push({ name: r.pick(['app', 'part', 'tier', 'z', r.pick(STRINGS)]), value: r.pick(['', 'x', 'word-count', r.pick(STRINGS)]), prefix: r.next(6) === 0 });
  if (r.next(3)) labels.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const spec: ShardSpec = {
    id,
    sources: r.pick([[], [{ journal: 'in/a', min_offset: 0n }], [{ journal: 'in/a', min_offset: 0n }, { journal: 'in/b', min_offset: 7n }], [{ journal: r.pick(STRINGS), min_offset: 0n }]]),
    recovery_log_prefix: r.pick(['', 'rec', 'rec', r.pick(STRINGS)]),
    hint_prefix: r.pick(['', '/hints', '/hints', r.pick(STRINGS)]),
    hint_backups: r.pick([0, 2, 2, 3]),
    max_txn_duration: randomDuration(r),
    min_txn_duration: randomDuration(r),
    disable: r.next(3) === 0,
    hot_standbys: r.pick([0, 1, 1, 2]),
    labels: { labels },
    disable_wait_for_ack: r.next(4) === 0,
    ring_buffer_size: r.pick([0, 0, 16384]),
    read_channel_size: r.pick([0, 0, 8]),
  };
  // Partial specs, as a hand-made listing may hold: fields left out altogether.
  if (r.next(8) === 0) delete (spec as Partial<ShardSpec>).sources;
  if (r.next(8) === 0) delete (spec as Partial<ShardSpec>).labels;
  if (r.next(8) === 0) delete (spec as Partial<ShardSpec>).hot_standbys;
  return spec;
}

function randomListing(r: ReturnType<typeof rng>): ListResponse_Shard[] {
  const n = r.next(7);
  const base = randomSpec(r, 'base');
  return Array.from({ length: n }, (_, i) => {
    // Mostly near copies of one spec (the common case of a listing), some unrelated.
    const spec = r.next(4) === 0 ? randomSpec(r, `shard-${i}`) : { ...structuredClone(base), id: `shard-${i}` };
    if (r.next(3) === 0) spec.hot_standbys = r.pick([0, 1, 5]);
    if (r.next(3) === 0) spec.labels = { labels: [...(spec.labels?.labels ?? []), { name: 'zz', value: String(i % 2), prefix: false }] };
    // A name given twice in a row (a group of two values), where the hoisting must join.
    const ls = spec.labels?.labels ?? [];
    if (ls.length && r.next(4) === 0) {
      const at = r.next(ls.length);
      ls.splice(at + 1, 0, { ...ls[at]!, value: r.pick(['x', 'y', ls[at]!.value]) });
    }
    return { spec: r.next(20) === 0 ? undefined : spec, mod_revision: r.pick([0n, BigInt(10 + i)]), route: undefined, status: [], create_revision: 1n };
  });
}

function randomSet(r: ReturnType<typeof rng>): ShardSet {
  const set = shardSetFromListing(randomListing(r));
  for (const e of set.shards) {
    if (r.next(4) === 0) e.comment = r.pick(STRINGS);
    if (r.next(4) === 0) e.delete = r.next(2) === 0;
    if (r.next(6) === 0) e.spec = normalizeShardSpec(undefined);
    if (r.next(6) === 0) e.revision = r.pick([undefined, 0n, -1n, 99n]);
  }
  if (r.next(5) === 0) set.common = normalizeShardSpec(undefined);
  if (r.next(8) === 0) set.common.id = 'odd';
  return set;
}

describe('shardspace fast paths', () => {
  it('hoisting a listing gives what the reference gives, and leaves the listing alone', () => {
    const r = rng(3);
    for (let k = 0; k < 5000; k++) {
      const listing = randomListing(r);
      const copy = structuredClone(listing);
      const got = shardSetFromListing(listing);
      assert.deepEqual(got, refFromListing(copy), `listing ${k}`);
      assert.deepEqual(listing, copy, `listing ${k} unchanged`);
      // The set owns its specs: changing them does not reach the listing.
      for (const e of got.shards) for (const l of e.spec.labels!.labels) l.value = 'changed';
      for (const l of got.common.labels!.labels) l.value = 'changed';
      assert.deepEqual(listing, copy, `listing ${k} unchanged by changes to the set`);
    }
  });

  it('hoisting joins labels where a name repeats, or is out of order, after the common ones', () => {
    const L = (...ls: [string, string][]) => ({ labels: ls.map(([name, value]) => ({ name, value, prefix: false })) });
    const cases = [
      [L(['app', 'x']), L(['app', 'x'], ['app', 'x'])],
      [L(['app', 'x']), L(['app', 'x'], ['app', 'y'])],
      [L(['app', 'x'], ['b', '1']), L(['app', 'x'], ['b', '1'], ['b', '2'])],
      [L(['app', 'x'], ['b', '1']), L(['b', '1'], ['app', 'x'])],
      [L(['b', '1'], ['app', 'x']), L(['app', 'x'], ['b', '1'])],
      [L(['app', 'x']), L(['app', 'x'], ['z', '1'], ['c', '2'])],
    ];
    for (const [a, b] of cases) {
      const listing = [a!, b!].map((labels, i) => ({ spec: normalizeShardSpec({ id: `shard-${i}`, labels }), mod_revision: 1n, route: undefined, status: [], create_revision: 1n }));
      assert.deepEqual(shardSetFromListing(listing), refFromListing(structuredClone(listing)), JSON.stringify([a, b]));
    }
  });

  it('the streaming encoder writes what the generic emitter writes, as text and as UTF-8 bytes', () => {
    const r = rng(17);
    for (let k = 0; k < 5000; k++) {
      const set = randomSet(r);
      const text = encodeShardSetGeneric(set);
      assert.equal(encodeShardSet(set), text, `set ${k}`);
      assert.deepEqual(encodeShardSetBytes(set), Buffer.from(text, 'utf8'), `set ${k}`);
    }
    const empty = shardSetFromListing([]);
    assert.equal(encodeShardSet(empty), 'common: {}\nshards: []\n');
    assert.equal(encodeShardSetGeneric(empty), 'common: {}\nshards: []\n');
  });
});
