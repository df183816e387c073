import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ReferencedJournalError, verifyReferencedJournals } from '../../../../src/lib/client/referenced-journals.js';
import { matchesSelector } from '../../../../src/lib/protocol/selector.js';
import { journalMatchLabels } from '../../../../src/lib/protocol/selector.js';
import type { LabelSelector, ListResponse_Journal } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import type { ApplyRequest_Change } from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import { normalizeShardSpec } from '../../../../src/lib/shardspace/shardspace.js';

function journal(name: string, contentType?: string): ListResponse_Journal {
  return {
    spec: {
      name,
      replication: 1,
      labels: { labels: contentType === undefined ? [] : [{ name: 'content-type', value: contentType, prefix: false }] },
      fragment: undefined,
      flags: 0,
      max_append_rate: 0n,
      suspend: undefined,
    },
    mod_revision: 1n,
    route: undefined,
    create_revision: 1n,
  };
}

const JOURNALS = [
  journal('in/a', 'application/x-ndjson'),
  journal('in/b', 'application/x-protobuf-fixed'),
  journal('in/c', 'text/csv'),
  journal('in/plain', 'text/plain'),
  journal('in/bare'),
  journal('rec/s-01', 'application/x-gazette-recoverylog'),
  journal('rec/s-02', 'application/x-ndjson'),
];

/** A List over JOURNALS that records its selectors. */
function lister() {
  const selectors: LabelSelector[] = [];
  const list = async (sel: LabelSelector) => {
    selectors.push(sel);
    return { journals: JOURNALS.filter((j) => matchesSelector(sel, journalMatchLabels(j.spec!))) };
  };
  return { list, selectors };
}

function upsert(id: string, sources: string[], recoveryLogPrefix = ''): ApplyRequest_Change {
  const spec = normalizeShardSpec({ id, sources: sources.map((journal) => ({ journal, min_offset: 0n })), recovery_log_prefix: recoveryLogPrefix });
  return { expect_mod_revision: 0n, upsert: spec, delete: '', primary_hints: undefined };
}
const del = (id: string): ApplyRequest_Change => ({ expect_mod_revision: 3n, upsert: undefined, delete: id, primary_hints: undefined });

describe('verifyReferencedJournals', () => {
  it('accepts sources of every framing and a recovery log, in one listing of exactly the named journals', async () => {
    const l = lister();
    await verifyReferencedJournals([upsert('s-01', ['in/a', 'in/b;suffix', 'in/c'], 'rec'), upsert('s-03', ['in/a']), del('gone')], l.list);
    assert.equal(l.selectors.length, 1);
    assert.deepEqual(
      l.selectors[0]!.include!.labels.map((x) => `${x.name}=${x.value}`),
      ['name=in/a', 'name=in/b', 'name=in/c', 'name=rec/s-01'],
    );
  });

  it('asks nothing when only deletes (or shards without journals) are applied', async () => {
    const l = lister();
    await verifyReferencedJournals([del('gone'), upsert('s-09', [])], l.list);
    assert.equal(l.selectors.length, 0);
  });

  const bad: [string, ApplyRequest_Change[], string][] = [
    ['a missing source', [upsert('s-01', ['in/a', 'in/nope'])], 'shard "s-01": source journal "in/nope" does not exist'],
    ['a source of an unknown content-type', [upsert('s-01', ['in/plain'])], 'shard "s-01": source journal "in/plain" has content-type text/plain, which is not a message framing (a source needs one of application/x-ndjson, application/x-protobuf-fixed, text/csv)'],
    ['a source without content-type', [upsert('s-01', ['in/bare'])], 'shard "s-01": source journal "in/bare" has no content-type label (a source needs one of application/x-ndjson, application/x-protobuf-fixed, text/csv)'],
    ['a missing recovery log', [upsert('s-04', ['in/a'], 'rec')], 'shard "s-04": recovery log journal "rec/s-04" does not exist'],
    ['a recovery log of the wrong content-type', [upsert('s-02', ['in/a'], 'rec')], 'shard "s-02": recovery log journal "rec/s-02" has content-type application/x-ndjson (expected content-type application/x-gazette-recoverylog)'],
    ['the first problem in change order', [upsert('s-01', ['in/a']), upsert('s-05', ['in/zz']), upsert('s-04', ['in/nope'])], 'shard "s-05": source journal "in/zz" does not exist'],
  ];
  for (const [what, changes, message] of bad) {
    it(`refuses ${what}`, async () => {
      await assert.rejects(verifyReferencedJournals(changes, lister().list), (e: unknown) => {
        assert.ok(e instanceof ReferencedJournalError);
        assert.equal(e.message, message);
        return true;
      });
    });
  }

  it('lists many names a few hundred at a time, each name once', async () => {
    const l = lister();
    const changes = Array.from({ length: 1200 }, (_, i) => upsert(`s-${String(i).padStart(4, '0')}`, [`in/x${i}`, 'in/a']));
    await assert.rejects(verifyReferencedJournals(changes, l.list), /shard "s-0000": source journal "in\/x0" does not exist/);
    assert.deepEqual(l.selectors.map((s) => s.include!.labels.length), [500, 500, 201]);
  });
});
