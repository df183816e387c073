// A primary that rolled forward over content only its replicas committed (a replica ahead after
// a pipeline failed mid-append, docs/net-splits.md) lists the stores until that content is in
// its index (Replica.refreshUntilCovered), rather than leaving readers blocked at the hole until
// the journal's refresh interval.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';

import { Replica } from '../../../../src/core/broker/replica.js';
import { rollTo } from '../../../../src/core/broker/primary.js';
import { Logger } from '../../../../src/core/log.js';
import { Persister } from '../../../../src/core/fragment/index.js';
import { nanosToDuration } from '../../../../src/lib/protocol/duration.js';
import { CompressionCodec, Status, type JournalSpec } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { FileStore } from '../../../../src/lib/stores/index.js';

const root = mkdtempSync(join(tmpdir(), 'roll-forward-test-'));
mkdirSync(join(root, 'store'));
after(() => rmSync(root, { recursive: true, force: true }));

const spec: JournalSpec = {
  name: 'roll/forward',
  replication: 2,
  labels: { labels: [] },
  fragment: {
    length: 1024n,
    compression_codec: CompressionCodec.NONE,
    stores: ['file:///store/'],
    refresh_interval: nanosToDuration(3600_000_000_000n), // an hour: only an explicit listing finds it
    retention: undefined,
    flush_interval: undefined,
    path_postfix_template: '',
  },
  flags: 0,
  max_append_rate: 0n,
  suspend: undefined,
};

it('the content a replica committed beyond the primary becomes readable at the primary once listed', async () => {
  const open = (url: string) => new FileStore(url, { root });
  const deps = () => ({ openStore: open, persister: new Persister({ openStore: open }), fileOnly: false, log: new Logger('error') });
  const primary = new Replica(spec, deps());
  const ahead = new Replica(spec, deps());
  try {
    await Promise.all([primary.loaded, ahead.loaded]);
    // The replica committed 12 bytes the primary never did.
    assert.equal(ahead.spool.applyProposal(ahead.proposal(), ahead.spool.registers).status, Status.OK);
    ahead.spool.apply(Buffer.from('twelve bytes'));
    assert.equal(ahead.spool.applyProposal(ahead.spool.next(), ahead.spool.registers).status, Status.OK);
    // Both roll to 12 (the resynchronised pipeline): the replica's spool [0, 12) is persisted.
    const completed = ahead.spool.applyProposal(rollTo(ahead, 12n), ahead.spool.registers).completed;
    assert.ok(completed);
    assert.ok(await ahead.persisted(completed));
    assert.equal(primary.spool.applyProposal(rollTo(primary, 12n), primary.spool.registers).status, Status.OK);

    const at0 = () => primary.index.query({ offset: 0n, block: false });
    assert.notEqual((await at0()).status, Status.OK, 'the primary knows nothing of [0, 12) yet');
    assert.equal(await primary.refreshUntilCovered(0n, 10_000), true);
    const q = await at0();
    assert.equal(q.status, Status.OK);
    assert.equal(q.offset, 0n);
    assert.equal(q.fragment.end, 12n);
  } finally {
    primary.close();
    ahead.close();
  }
});
