import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  buildJournalApplyRequest,
  decodeJournalTree,
  encodeJournalTree,
  flattenJournalTree,
  journalTreeFromListing,
  journalsFromListJson,
  normalizeJournalSpec,
  validateJournalTree,
  type JournalNode,
} from '../../../../src/lib/index.js';
import { ValidationError } from '../../../../src/lib/protocol/errors.js';
import { durationToNanos } from '../../../../src/lib/protocol/duration.js';
import { CompressionCodec, JournalSpec_Flag, JournalSpec_Suspend_Level } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { fixture } from '../../../helpers/specs.js';

// Listings produced by Go gazctl v0.103.0 (`journals list -o json|yaml`) against a real broker.
const LISTINGS = ['all', 'acme', 'deep', 'quoting', 'single', 'empty'];

describe('journal tree: golden output of Go gazctl', () => {
  for (const name of LISTINGS) {
    it(`encodes list-${name} byte for byte`, () => {
      const journals = journalsFromListJson(fixture(`list-${name}.json`));
      assert.equal(encodeJournalTree(journalTreeFromListing(journals)), fixture(`list-${name}.yaml`));
    });
  }

  it('loads the JSON fixture fields (codecs, durations, suspend, revisions)', () => {
    const js = journalsFromListJson(fixture('list-acme.json'));
    const p2 = js.find((j) => j.spec!.name === 'acme/payments/part-002')!;
    assert.equal(p2.spec!.fragment!.compression_codec, CompressionCodec.SNAPPY);
    assert.equal(durationToNanos(p2.spec!.fragment!.flush_interval), 3600n * 1_000_000_000n);
    assert.equal(p2.spec!.suspend?.level, JournalSpec_Suspend_Level.FULL);
    assert.equal(p2.spec!.flags, JournalSpec_Flag.O_RDWR);
    assert.equal(p2.mod_revision, 3n);
  });
});

describe('journal tree: round trip', () => {
  for (const name of ['all', 'acme', 'deep', 'quoting', 'single']) {
    it(`list-${name}: list → YAML → decode → flatten reproduces every spec and revision`, () => {
      const journals = journalsFromListJson(fixture(`list-${name}.json`));
      const tree = decodeJournalTree(encodeJournalTree(journalTreeFromListing(journals)));
      validateJournalTree(tree);
      const changes = flattenJournalTree(tree);
      assert.equal(changes.length, journals.length);
      changes.forEach((c, i) => {
        assert.equal(c.delete, '');
        assert.equal(c.expect_mod_revision, journals[i]!.mod_revision);
        assert.deepEqual(c.upsert, normalizeJournalSpec(journals[i]!.spec));
      });
      // The whole request passes protocol validation (a re-apply would be a no-op in content).
      assert.equal(buildJournalApplyRequest(tree).changes.length, journals.length);
    });
  }

  it('the hand-written apply inputs flatten into valid requests', () => {
    for (const f of ['apply-acme.yaml', 'apply-quoting.yaml', 'apply-deep.yaml']) {
      const req = buildJournalApplyRequest(decodeJournalTree(fixture(f)));
      assert.ok(req.changes.length >= 4, f);
      for (const c of req.changes) assert.equal(c.expect_mod_revision, 0n);
    }
  });
});

const BASE = `
name: a/
replication: 3
labels:
- name: shared
  value: one
- name: team
  value: x
- name: team
  value: y
fragment:
  length: 1024
  compression_codec: GZIP
  stores:
  - s3://bucket/a/
  refresh_interval: 1m
  retention: 24h
flags: O_RDWR
`;

function flat(yaml: string) {
  return flattenJournalTree(decodeJournalTree(yaml));
}

describe('journal tree: inheritance', () => {
  it('zero fields inherit, labels merge per name with the child winning', () => {
    const [c] = flat(`${BASE}children:
- name: a/one
  replication: 2
  labels:
  - name: team
    value: z
  - name: zone
    value: eu
  revision: 7
`);
    const s = c!.upsert!;
    assert.equal(c!.expect_mod_revision, 7n);
    assert.equal(s.name, 'a/one');
    assert.equal(s.replication, 2);
    assert.deepEqual(
      s.labels!.labels.map((l) => `${l.name}=${l.value}`),
      ['shared=one', 'team=z', 'zone=eu'],
    );
    assert.equal(s.fragment!.length, 1024n);
    assert.equal(s.fragment!.compression_codec, CompressionCodec.GZIP);
    assert.deepEqual(s.fragment!.stores, ['s3://bucket/a/']);
    assert.equal(durationToNanos(s.fragment!.refresh_interval), 60_000_000_000n);
    assert.equal(durationToNanos(s.fragment!.retention), 86_400_000_000_000n);
    assert.equal(s.flags, JournalSpec_Flag.O_RDWR);
  });

  it('stores inherit only when absent: an explicit empty list is kept', () => {
    const [absent, nulled, empty, own] = flat(`${BASE}children:
- name: a/absent
- name: a/empty
  fragment:
    stores: []
- name: a/null
  fragment:
    stores:
- name: a/own
  fragment:
    stores: [file:///own/]
`).map((c) => c.upsert!.fragment!.stores);
    assert.deepEqual(absent, ['s3://bucket/a/']);
    assert.deepEqual(nulled, []);
    assert.deepEqual(empty, ['s3://bucket/a/']); // `stores:` with no value is null ⇒ absent
    assert.deepEqual(own, ['file:///own/']);
  });

  it('suspend is never inherited; a terminal keeps its own', () => {
    const [a, b] = flat(`${BASE}suspend:
  level: FULL
children:
- name: a/one
- name: a/two
  suspend: {level: 1, offset: 42}
`);
    assert.equal(a!.upsert!.suspend, undefined);
    assert.deepEqual(b!.upsert!.suspend, { level: JournalSpec_Suspend_Level.PARTIAL, offset: 42n });
  });

  it('delete is inherited unless the child sets it, and becomes a delete change', () => {
    const changes = flat(`delete: true
name: a/
children:
- name: a/b/
  children:
  - name: a/b/one
    revision: 10
  - name: a/b/two
    delete: false
    replication: 1
    revision: 11
- name: a/three
  revision: -1
`);
    assert.deepEqual(
      changes.map((c) => [c.delete, c.upsert?.name ?? null, c.expect_mod_revision]),
      [['a/b/one', null, 10n], ['', 'a/b/two', 11n], ['a/three', null, -1n]],
    );
  });

  it('a child cannot override a parent value back to zero (quirk)', () => {
    const [c] = flat(`${BASE}children:
- name: a/one
  replication: 0
  fragment:
    retention: 0s
`);
    assert.equal(c!.upsert!.replication, 3);
    assert.equal(durationToNanos(c!.upsert!.fragment!.retention), 86_400_000_000_000n);
  });

  it('hoists common fields into directories and only where names branch', () => {
    const base = normalizeJournalSpec({
      replication: 2,
      labels: { labels: [{ name: 'app', value: 'x', prefix: false }] },
    });
    const mk = (name: string, rev: bigint, extra: Partial<typeof base> = {}) => ({
      spec: { ...normalizeJournalSpec(base), ...extra, name },
      mod_revision: rev,
      route: undefined,
      create_revision: rev,
    });
    const tree = journalTreeFromListing([
      mk('x/a/1', 5n),
      mk('x/a/2', 6n, { suspend: { level: JournalSpec_Suspend_Level.FULL, offset: 9n } }),
      mk('x/b', 7n, { replication: 3 }),
    ]);
    assert.equal(
      encodeJournalTree(tree),
      [
        'name: x/',
        'labels:',
        '- name: app',
        '  value: x',
        'children:',
        '- name: x/a/',
        '  replication: 2',
        '  children:',
        '  - name: x/a/1',
        '    revision: 5',
        '  - name: x/a/2',
        '    suspend:',
        '      level: FULL',
        '      offset: 9',
        '    revision: 6',
        '- name: x/b',
        '  replication: 3',
        '  revision: 7',
        '',
      ].join('\n'),
    );
  });

  it('an empty listing is {} and a comment/delete round-trip through encode', () => {
    assert.equal(encodeJournalTree(journalTreeFromListing([])), '{}\n');
    const node: JournalNode = decodeJournalTree('comment: keep me\ndelete: false\nname: a/b\nrevision: 3\n');
    assert.equal(encodeJournalTree(node), 'comment: keep me\ndelete: false\nname: a/b\nrevision: 3\n');
  });
});

describe('journal tree: validation', () => {
  const bad: [string, RegExp][] = [
    ['name: ns/\n', /expected one or more children/],
    ['name: ns/\nrevision: 3\nchildren:\n- name: ns/bb\n', /unexpected revision \(3\)/],
    ['name: ns/\nchildren:\n- name: other/cc\n', /expected parent name to prefix child \(ns\/ vs other\/cc\)/],
    ['name: ns/\nchildren:\n- name: ns/cc\n- name: ns/bb\n', /expected children to be ordered \(index 1; ns\/cc vs ns\/bb\)/],
    ['name: ns/\nchildren:\n- name: ns/bb\n- name: ns/bb\n', /expected children to be ordered/],
    ['name: ns/bb\nchildren:\n- name: ns/bb/c\n', /expected no children with non-directory node \(ns\/bb\)/],
    ['name: ns/\nchildren:\n- name: ns//bb\n', /^name: /],
    ['{}\n', /expected one or more children/],
  ];
  for (const [yaml, re] of bad) {
    it(`rejects ${JSON.stringify(yaml)}`, () => {
      assert.throws(() => validateJournalTree(decodeJournalTree(yaml)), (e: unknown) => e instanceof ValidationError && re.test(e.message));
    });
  }

  it('accepts a well-formed tree', () => {
    validateJournalTree(decodeJournalTree('name: ns/\nchildren:\n- name: ns/bb\n- name: ns/cc/\n  children:\n  - name: ns/cc/dd\n'));
  });

  it('rejects an invalid flattened spec in buildJournalApplyRequest', () => {
    assert.throws(() => buildJournalApplyRequest(decodeJournalTree('name: a/b/c\nreplication: 9\n')), ValidationError);
  });
});

describe('journal tree: strict decoding', () => {
  const cases: [string, string, string][] = [
    ['unknown field', 'name: a/\nchildren:\n- name: a/b\n  replicaton: 3\n', 'line 4: unknown field "replicaton" in journal node'],
    ['duplicate key', 'name: a/b\nreplication: 1\nname: a/c\n', 'line 3: duplicate key "name" in journal node'],
    ['wrong type', 'name: a/b\n\nreplication: three\n', 'line 3: replication: expected an integer, got "three"'],
    ['quoted integer', 'name: a/b\nreplication: "3"\n', 'line 2: replication: expected an integer, got "3"'],
    ['bad duration', 'name: a/b\nfragment:\n  retention: 5 days\n', 'line 3: fragment.retention: invalid duration "5 days"'],
    [
      'unknown codec',
      'name: a/b\nfragment:\n  compression_codec: SNAPY\n',
      'line 3: fragment.compression_codec: "SNAPY" is not a valid CompressionCodec (options are INVALID, NONE, GZIP, ZSTANDARD, SNAPPY, GZIP_OFFLOAD_DECOMPRESSION)',
    ],
    ['codec by number', 'name: a/b\nfragment:\n  compression_codec: 2\n', 'line 3: fragment.compression_codec: "2" is not a valid CompressionCodec (options are INVALID, NONE, GZIP, ZSTANDARD, SNAPPY, GZIP_OFFLOAD_DECOMPRESSION)'],
    ['unknown flag', 'name: a/b\nflags: O_RDWX\n', 'line 2: flags: "O_RDWX" is not a valid JournalSpec_Flag (options are NOT_SPECIFIED, O_RDONLY, O_WRONLY, O_RDWR)'],
    ['unknown fragment key', 'name: a/b\nfragment:\n  lenght: 1024\n', 'line 3: unknown field "lenght" in fragment'],
    ['unknown label key', 'name: a/b\nlabels:\n- name: x\n  valu: y\n', 'line 4: unknown field "valu" in label'],
    ['bool type', 'name: a/b\ndelete: maybe\n', 'line 2: delete: expected a boolean, got "maybe"'],
    ['labels not a list', 'name: a/b\nlabels: x\n', 'line 2: labels: expected a sequence, got "x"'],
    ['root not a mapping', '- a\n- b\n', 'line 1: expected a mapping for journal node, got a sequence'],
  ];
  for (const [what, yaml, msg] of cases) {
    it(`reports ${what}`, () => {
      assert.throws(() => decodeJournalTree(yaml), (e: unknown) => {
        assert.ok(e instanceof ValidationError);
        assert.equal(e.message, msg);
        assert.ok(!e.message.includes('\n'));
        return true;
      });
    });
  }

  it('rejects empty and whitespace-only input', () => {
    for (const t of ['', '   \n\n', '# nothing\n']) assert.throws(() => decodeJournalTree(t), /empty journal hierarchy/);
  });

  it('accepts Go-style values: duration strings or nanoseconds, enum names or integers, YAML 1.1 bools', () => {
    const n = decodeJournalTree(`name: a/b
delete: yes
flags: 4
max_append_rate: 0x10
fragment:
  refresh_interval: 1h30m
  retention: 1500000000
  flush_interval: 1.5m
suspend:
  level: FULL
  offset: 12
`);
    assert.equal(n.delete, true);
    assert.equal(n.spec.flags, JournalSpec_Flag.O_RDWR);
    assert.equal(n.spec.max_append_rate, 16n);
    assert.equal(durationToNanos(n.spec.fragment!.refresh_interval), 5400n * 1_000_000_000n);
    assert.equal(durationToNanos(n.spec.fragment!.retention), 1_500_000_000n);
    assert.equal(durationToNanos(n.spec.fragment!.flush_interval), 90n * 1_000_000_000n);
    assert.deepEqual(n.spec.suspend, { level: JournalSpec_Suspend_Level.FULL, offset: 12n });
    assert.equal(decodeJournalTree('name: a/b\nflags: O_RDONLY\n').spec.flags, JournalSpec_Flag.O_RDONLY);
    assert.equal(decodeJournalTree('name: a/b\nsuspend:\n  level: 2\n').spec.suspend?.level, JournalSpec_Suspend_Level.FULL);
    // Strings that look like numbers are still strings for string fields.
    assert.equal(decodeJournalTree('name: 1234\n').spec.name, '1234');
  });
});
