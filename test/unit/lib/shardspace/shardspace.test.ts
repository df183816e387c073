import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  buildShardApplyRequest,
  decodeShardSet,
  encodeShardSet,
  flattenShardSet,
  normalizeShardSpec,
  shardSetFromListing,
  validateShardSet,
} from '../../../../src/lib/index.js';
import { ValidationError } from '../../../../src/lib/protocol/errors.js';
import { durationToNanos, nanosToDuration } from '../../../../src/lib/protocol/duration.js';
import type { ListResponse_Shard, ShardSpec } from '../../../../src/lib/protocol/gen/consumer/protocol.js';

const SEC = 1_000_000_000n;

function shard(id: string, rev: bigint, extra: Partial<ShardSpec> = {}): ListResponse_Shard {
  const spec = normalizeShardSpec({
    id,
    sources: [{ journal: `examples/${id}`, min_offset: 0n }],
    recovery_log_prefix: 'recovery/logs',
    hint_prefix: '/gazette/hints',
    hint_backups: 2,
    max_txn_duration: nanosToDuration(SEC),
    hot_standbys: 1,
    labels: { labels: [{ name: 'app', value: 'word-count', prefix: false }] },
    ...extra,
  });
  return { spec, mod_revision: rev, route: undefined, status: [], create_revision: rev };
}

const LISTING = [
  shard('shard-000', 123n),
  shard('shard-001', 456n, {
    sources: [{ journal: 'examples/b', min_offset: 1024n }],
    labels: { labels: [{ name: 'app', value: 'word-count', prefix: false }, { name: 'tier', value: 'hot', prefix: false }] },
    disable: true,
  }),
  shard('shard-002', 789n, { min_txn_duration: nanosToDuration(SEC / 2n), ring_buffer_size: 16384 }),
];

describe('shard set: hoisting and encoding', () => {
  it('hoists fields common to all shards into common (sources compared whole)', () => {
    assert.equal(
      encodeShardSet(shardSetFromListing(LISTING)),
      `common:
  recovery_log_prefix: recovery/logs
  hint_prefix: /gazette/hints
  hint_backups: 2
  max_txn_duration: 1s
  hot_standbys: 1
  labels:
  - name: app
    value: word-count
shards:
- id: shard-000
  sources:
  - journal: examples/shard-000
  revision: 123
- id: shard-001
  sources:
  - journal: examples/b
    min_offset: 1024
  disable: true
  labels:
  - name: tier
    value: hot
  revision: 456
- id: shard-002
  sources:
  - journal: examples/shard-002
  min_txn_duration: 500ms
  ring_buffer_size: 16384
  revision: 789
`,
    );
  });

  it('writes common: {} and shards: [] for an empty listing', () => {
    assert.equal(encodeShardSet(shardSetFromListing([])), 'common: {}\nshards: []\n');
  });

  it('puts everything but id and revision into common for a single shard', () => {
    const text = encodeShardSet(shardSetFromListing([LISTING[0]!]));
    assert.match(text, /^common:\n  sources:\n  - journal: examples\/shard-000\n  recovery_log_prefix/);
    assert.match(text, /\nshards:\n- id: shard-000\n  revision: 123\n$/);
  });

  it('round-trips list → YAML → decode → flatten to the same specs and revisions', () => {
    const set = decodeShardSet(encodeShardSet(shardSetFromListing(LISTING)));
    const changes = flattenShardSet(set);
    assert.equal(changes.length, LISTING.length);
    changes.forEach((c, i) => {
      assert.equal(c.expect_mod_revision, LISTING[i]!.mod_revision);
      assert.equal(c.delete, '');
      assert.deepEqual(c.upsert, normalizeShardSpec(LISTING[i]!.spec));
    });
    assert.equal(buildShardApplyRequest(set).changes.length, 3);
  });
});

describe('shard set: flattening', () => {
  const YAML = `common:
  recovery_log_prefix: recovery/logs
  hint_prefix: /gazette/hints
  max_txn_duration: 2s
  disable: true
  sources:
  - journal: examples/common
  labels:
  - name: app
    value: a
  - name: tier
    value: cold
shards:
- id: shard-000
  labels:
  - name: tier
    value: hot
  revision: 5
- comment: anything
  delete: true
  id: shard-001
  revision: 6
- id: shard-002
  disable: false
  sources:
  - journal: examples/own
    min_offset: 7
`;

  it('fills zero fields from common; labels per name; sources whole; delete by id', () => {
    const [a, b, c] = flattenShardSet(decodeShardSet(YAML));
    assert.equal(a!.expect_mod_revision, 5n);
    assert.equal(a!.upsert!.id, 'shard-000');
    assert.deepEqual(a!.upsert!.sources, [{ journal: 'examples/common', min_offset: 0n }]);
    assert.deepEqual(a!.upsert!.labels!.labels.map((l) => `${l.name}=${l.value}`), ['app=a', 'tier=hot']);
    assert.equal(durationToNanos(a!.upsert!.max_txn_duration), 2n * SEC);
    assert.equal(a!.upsert!.recovery_log_prefix, 'recovery/logs');
    assert.deepEqual(b, { expect_mod_revision: 6n, upsert: undefined, delete: 'shard-001', primary_hints: undefined });
    assert.deepEqual(c!.upsert!.sources, [{ journal: 'examples/own', min_offset: 7n }]);
    assert.equal(c!.upsert!.disable, true); // false cannot override a true in common
    assert.equal(c!.expect_mod_revision, 0n);
  });

  it('keeps comment and delete when re-encoded', () => {
    const text = encodeShardSet(decodeShardSet(YAML));
    assert.match(text, /\n- comment: anything\n  delete: true\n  id: shard-001\n  revision: 6\n/);
    assert.match(text, /\n- id: shard-002\n  sources:\n  - journal: examples\/own\n    min_offset: 7\n/);
  });
});

describe('shard set: decoding and validation errors', () => {
  const cases: [string, string, string][] = [
    ['comment in common', 'common:\n  comment: hi\nshards: []\n', 'line 2: unknown field "comment" in common (a ShardSpec; comment is only allowed on shard entries)'],
    ['a non-bool delete in common', 'common:\n  delete: soon\nshards: []\n', 'line 2: common.delete: expected a boolean, got "soon"'],
    ['revision in common', 'common:\n  revision: 3\nshards: []\n', 'line 2: unknown field "revision" in common (a ShardSpec; revision is only allowed on shard entries)'],
    ['unknown top-level key', 'common: {}\nshard: []\n', 'line 2: unknown field "shard" in shard set'],
    ['unknown shard key', 'shards:\n- id: shard-000\n  hot_standby: 1\n', 'line 3: unknown field "hot_standby" in shard'],
    ['duplicate key', 'shards:\n- id: shard-000\n  id: shard-001\n', 'line 3: duplicate key "id" in shard'],
    ['negative uint', 'shards:\n- id: shard-000\n  hot_standbys: -1\n', 'line 3: hot_standbys: integer -1 out of range [0, 4294967295]'],
    ['bad duration', 'common:\n  max_txn_duration: forever\n', 'line 2: max_txn_duration: invalid duration "forever"'],
    ['unknown source key', 'shards:\n- id: shard-000\n  sources:\n  - journal: a/b/c\n    offset: 3\n', 'line 5: unknown field "offset" in source'],
  ];
  for (const [what, yaml, msg] of cases) {
    it(`reports ${what}`, () => {
      assert.throws(() => decodeShardSet(yaml), (e: unknown) => e instanceof ValidationError && e.message === msg);
    });
  }

  it('decodes empty input as an empty set (like yaml.v2)', () => {
    const set = decodeShardSet('');
    assert.deepEqual(set.shards, []);
    assert.deepEqual(flattenShardSet(set), []);
  });

  it('validates shard ids and rejects duplicates', () => {
    assert.throws(() => validateShardSet(decodeShardSet('shards:\n- id: ab\n')), (e: unknown) => e instanceof ValidationError && /^shards\[0\]\.id: /.test(e.message));
    assert.throws(() => validateShardSet(decodeShardSet('shards:\n- id: shard-1\n- id: shard-1\n')), { message: /duplicate shard id "shard-1"/ });
  });

  it('rejects an invalid flattened spec (no max_txn_duration)', () => {
    assert.throws(() => buildShardApplyRequest(decodeShardSet('shards:\n- id: shard-000\n  sources:\n  - journal: a/b/c\n')), ValidationError);
  });
});

describe('shard set: delete: true under common', () => {
  const SET = `common:
  delete: true
  max_txn_duration: 1s
  sources:
  - journal: examples/a
shards:
- id: shard-000
  revision: 11
- id: shard-001
  revision: 12
- id: shard-002
  revision: -1
`;

  it('deletes exactly the listed shards, each at its own revision', () => {
    const changes = buildShardApplyRequest(decodeShardSet(SET)).changes;
    assert.deepEqual(changes, [
      { expect_mod_revision: 11n, upsert: undefined, delete: 'shard-000', primary_hints: undefined },
      { expect_mod_revision: 12n, upsert: undefined, delete: 'shard-001', primary_hints: undefined },
      { expect_mod_revision: -1n, upsert: undefined, delete: 'shard-002', primary_hints: undefined },
    ]);
  });

  it('lets a shard keep itself with its own delete: false', () => {
    const changes = flattenShardSet(decodeShardSet(SET.replace('- id: shard-001\n', '- id: shard-001\n  delete: false\n')));
    assert.deepEqual(changes.map((c) => (c.upsert ? `upsert ${c.upsert.id}` : `delete ${c.delete}`)), ['delete shard-000', 'upsert shard-001', 'delete shard-002']);
    assert.equal(changes[1]!.upsert!.sources[0]!.journal, 'examples/a');
  });

  it('with delete: false or no delete in common, nothing is deleted', () => {
    for (const text of [SET.replace('delete: true', 'delete: false'), SET.replace('  delete: true\n', '')]) {
      assert.deepEqual(flattenShardSet(decodeShardSet(text)).map((c) => c.delete), ['', '', '']);
    }
  });

  it('a deleted shard needs a revision (> 0 or -1), as any delete', () => {
    assert.throws(() => buildShardApplyRequest(decodeShardSet('common:\n  delete: true\nshards:\n- id: shard-000\n')), (e: unknown) =>
      e instanceof ValidationError && /expect_mod_revision 0 is invalid for a delete/.test(e.message));
  });

  it('is never written back: encoding drops it', () => {
    const text = encodeShardSet(decodeShardSet(SET));
    assert.doesNotMatch(text, /delete/);
    assert.match(text, /^common:\n  sources:\n  - journal: examples\/a\n  max_txn_duration: 1s\nshards:\n- id: shard-000\n  revision: 11\n/);
  });
});
