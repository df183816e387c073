import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ApplyRequest_Change, JournalSpec, ListResponse_Journal } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import type {
  ApplyRequest_Change as ShardChange,
  ListResponse_Shard,
  ShardSpec,
} from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import { commonDirPrefix, planChanges, planJournalChanges, planSelector, planShardChanges, type PlanSubject } from '../../../../src/lib/client/index.js';

function jspec(name: string, rate = 0n): JournalSpec {
  return {
    name,
    replication: 1,
    labels: { labels: [{ name: 'app', value: 'x', prefix: false }] },
    fragment: undefined,
    flags: 0,
    max_append_rate: rate,
    suspend: undefined,
  };
}
const jcur = (name: string, rev: bigint, rate = 0n): ListResponse_Journal => ({ spec: jspec(name, rate), mod_revision: rev, route: undefined, create_revision: rev });
const jup = (name: string, rev: bigint, rate = 0n): ApplyRequest_Change => ({ expect_mod_revision: rev, upsert: jspec(name, rate), delete: '' });
const jdel = (name: string, rev: bigint): ApplyRequest_Change => ({ expect_mod_revision: rev, upsert: undefined, delete: name });

function sspec(id: string, disable = false): ShardSpec {
  return {
    id,
    sources: [{ journal: 'a/j', min_offset: 0n }],
    recovery_log_prefix: 'rec',
    hint_prefix: '/hints',
    hint_backups: 2,
    max_txn_duration: { seconds: 1n, nanos: 0 },
    min_txn_duration: undefined,
    disable,
    hot_standbys: 0,
    labels: { labels: [] },
    disable_wait_for_ack: false,
    ring_buffer_size: 0,
    read_channel_size: 0,
  };
}
const scur = (id: string, rev: bigint, disable = false): ListResponse_Shard => ({ spec: sspec(id, disable), mod_revision: rev, route: undefined, status: [], create_revision: rev });
const sup = (id: string, rev: bigint, disable = false): ShardChange => ({ expect_mod_revision: rev, upsert: sspec(id, disable), delete: '', primary_hints: undefined });
const sdel = (id: string, rev: bigint): ShardChange => ({ expect_mod_revision: rev, upsert: undefined, delete: id, primary_hints: undefined });

const summary = (p: { entries: { name: string; kind: string; conflict?: string }[] }) =>
  p.entries.map((e) => `${e.kind} ${e.name}${e.conflict ? ` ! ${e.conflict}` : ''}`);

describe('planJournalChanges', () => {
  const current = [jcur('a/same', 10n), jcur('a/old', 11n), jcur('a/taken', 12n), jcur('a/moved', 13n), jcur('a/gone', 14n), jcur('a/other', 15n)];

  it('classifies every kind of change, in input order', () => {
    const changes = [
      jup('a/new', 0n), // create
      jup('a/old', 11n, 5n), // update at the current revision
      jup('a/any', -1n), // upsert whatever the revision
      jdel('a/gone', 14n), // delete
      jdel('a/other', -1n), // delete at any revision
      jup('a/same', 10n), // unchanged
    ];
    const plan = planJournalChanges(changes, current);
    assert.deepEqual(summary(plan), ['create a/new', 'update a/old', 'upsert a/any', 'delete a/gone', 'delete a/other', 'unchanged a/same']);
    assert.deepEqual(plan.changes, changes.slice(0, 5), 'unchanged upserts are not sent');
    assert.equal(plan.unchanged, 1);
    assert.deepEqual(plan.conflicts, []);
    assert.equal(plan.entries[0]!.change, changes[0]);
    assert.equal(plan.entries[3]!.expectModRevision, 14n);
  });

  it('names the conflicts the transaction would refuse', () => {
    const changes = [jup('a/taken', 0n), jup('a/missing', 7n), jup('a/moved', 9n, 1n), jdel('a/nothing', 3n), jdel('a/moved', 2n)];
    const plan = planJournalChanges(changes, current);
    assert.deepEqual(summary(plan), [
      'create a/taken ! already exists at revision 12',
      'update a/missing ! does not exist',
      'update a/moved ! is at revision 13',
      'delete a/nothing ! does not exist',
      'delete a/moved ! is at revision 13',
    ]);
    assert.equal(plan.conflicts.length, 5);
    assert.equal(plan.changes.length, 5, 'conflicting changes are still sent: the transaction decides');
  });

  it('re-applying a listing is a no-op; -1 on an equal spec is unchanged too', () => {
    const listing = current.map((j) => ({ expect_mod_revision: j.mod_revision, upsert: structuredClone(j.spec!), delete: '' }));
    const plan = planJournalChanges(listing, current);
    assert.equal(plan.changes.length, 0);
    assert.equal(plan.unchanged, current.length);
    assert.deepEqual(summary(planJournalChanges([jup('a/same', -1n)], current)), ['unchanged a/same']);
  });

  it('an equal spec at another revision is not unchanged: it is a conflict', () => {
    assert.deepEqual(summary(planJournalChanges([jup('a/same', 9n)], current)), ['update a/same ! is at revision 10']);
    assert.deepEqual(summary(planJournalChanges([jup('a/same', 0n)], current)), ['create a/same ! already exists at revision 10']);
  });

  it('compares whole specs: a different field is an update', () => {
    assert.deepEqual(summary(planJournalChanges([jup('a/same', 10n, 1n)], current)), ['update a/same']);
  });

  it('is linear: 20,000 changes against 20,000 listed journals', () => {
    const n = 20_000;
    const cur = Array.from({ length: n }, (_, i) => jcur(`big/${i}`, BigInt(i + 1)));
    const changes = cur.map((j, i) => jup(j.spec!.name, j.mod_revision, i % 2 ? 1n : 0n));
    const plan = planJournalChanges(changes, cur);
    assert.equal(plan.changes.length, n / 2);
    assert.equal(plan.unchanged, n / 2);
  });
});

describe('planShardChanges', () => {
  const current = [scur('s/same', 20n), scur('s/old', 21n), scur('s/taken', 22n), scur('s/gone', 23n)];

  it('classifies every kind of change, with the same reasons as journals', () => {
    const changes = [
      sup('s/new', 0n),
      sup('s/old', 21n, true),
      sup('s/any', -1n),
      sdel('s/gone', 23n),
      sup('s/same', 20n),
      sup('s/taken', 0n),
      sup('s/missing', 5n),
      sdel('s/old', 3n),
    ];
    const plan = planShardChanges(changes, current);
    assert.deepEqual(summary(plan), [
      'create s/new',
      'update s/old',
      'upsert s/any',
      'delete s/gone',
      'unchanged s/same',
      'create s/taken ! already exists at revision 22',
      'update s/missing ! does not exist',
      'delete s/old ! is at revision 21',
    ]);
    assert.equal(plan.unchanged, 1);
    assert.equal(plan.changes.length, 7);
    assert.equal(plan.conflicts.length, 3);
  });

  it('re-applying a shard listing is a no-op', () => {
    const listing = current.map((s) => ({ expect_mod_revision: s.mod_revision, upsert: structuredClone(s.spec!), delete: '', primary_hints: undefined }));
    const plan = planShardChanges(listing, current);
    assert.equal(plan.changes.length, 0);
    assert.equal(plan.unchanged, current.length);
  });

  it('an unchanged spec that writes primary hints is still sent', () => {
    const c: ShardChange = { ...sup('s/same', 20n), primary_hints: { log: 'rec/s/same', live_nodes: [], properties: [] } };
    const plan = planShardChanges([c], current);
    assert.deepEqual(summary(plan), ['update s/same']);
    assert.equal(plan.changes.length, 1);
  });
});

describe('planChanges', () => {
  it('works for any item kind described by a subject', () => {
    type C = { n: string; rev: bigint; v?: string };
    const plan = planChanges<C, { n: string; rev: bigint; v: string }>(
      [{ n: 'x', rev: 1n, v: 'a' }, { n: 'y', rev: 0n, v: 'b' }, { n: 'z', rev: -1n }],
      [{ n: 'x', rev: 1n, v: 'a' }, { n: 'z', rev: 4n, v: 'c' }],
      {
        changeName: (c) => c.n,
        expectModRevision: (c) => c.rev,
        isUpsert: (c) => c.v !== undefined,
        upsertText: (c) => c.v!,
        currentName: (c) => c.n,
        currentRevision: (c) => c.rev,
        currentText: (c) => c.v,
      },
    );
    assert.deepEqual(summary(plan), ['unchanged x', 'create y', 'delete z']);
  });

  it('renders a spec only to compare it with an existing item', () => {
    type Item = { n: string; rev: bigint };
    let rendered = 0;
    const subject: PlanSubject<Item, Item> = {
      changeName: (c) => c.n,
      expectModRevision: (c) => c.rev,
      isUpsert: () => true,
      upsertText: (c) => {
        rendered++;
        return c.n;
      },
      currentName: (c) => c.n,
      currentRevision: (c) => c.rev,
      currentText: (c) => c.n,
    };
    const creates = Array.from({ length: 1000 }, (_, i) => ({ n: `new/${i}`, rev: 0n }));
    const plan = planChanges([...creates, { n: 'old', rev: 3n }], [{ n: 'old', rev: 3n }], subject);
    assert.equal(plan.changes.length, 1000);
    assert.equal(plan.unchanged, 1);
    assert.equal(rendered, 1);
  });
});

describe('planSelector', () => {
  it('selects by the longest common directory prefix', () => {
    assert.equal(commonDirPrefix(['a/b/c', 'a/b/d', 'a/bx/e']), 'a/');
    assert.equal(commonDirPrefix(['a/b/c', 'a/b/d']), 'a/b/');
    assert.equal(commonDirPrefix(['a/b/c']), 'a/b/');
    assert.equal(commonDirPrefix(['abc', 'abd']), '');
    assert.equal(commonDirPrefix([]), '');
    assert.deepEqual(planSelector(['acme/x', 'acme/y'], 'name'), {
      include: { labels: [{ name: 'name', value: 'acme/', prefix: true }] },
      exclude: { labels: [] },
    });
    assert.deepEqual(planSelector(['s/1', 's/2'], 'id').include!.labels, [{ name: 'id', value: 's/', prefix: true }]);
    assert.deepEqual(planSelector(['x', 'y'], 'id').include!.labels, []);
  });
});
