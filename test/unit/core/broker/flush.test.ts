// What the broker's flush relies on in Replica: the flush proposal (a roll at the spool's end
// when it holds content, nothing when it is empty), and waiting on the persisting of the closed
// spool, and of every spool closed before it, until the fragment is in the store and the index.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';

import { Replica } from '../../../../src/core/broker/replica.js';
import { Logger } from '../../../../src/core/log.js';
import { fragmentEquals, Persister } from '../../../../src/core/fragment/index.js';
import { nanosToDuration } from '../../../../src/lib/protocol/duration.js';
import { fragmentContentPath } from '../../../../src/lib/protocol/fragment.js';
import { CompressionCodec, Status, type JournalSpec } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { FileStore } from '../../../../src/lib/stores/index.js';

const root = mkdtempSync(join(tmpdir(), 'flush-test-'));
mkdirSync(join(root, 'store'));
after(() => rmSync(root, { recursive: true, force: true }));

function spec(name: string, length: bigint): JournalSpec {
  return {
    name,
    replication: 1,
    labels: { labels: [] },
    fragment: {
      length,
      compression_codec: CompressionCodec.NONE,
      stores: ['file:///store/'],
      refresh_interval: nanosToDuration(3600_000_000_000n),
      retention: undefined,
      flush_interval: undefined,
      path_postfix_template: '',
    },
    flags: 0,
    max_append_rate: 0n,
    suspend: undefined,
  };
}

function commit(r: Replica, text: string): void {
  const roll = r.proposal();
  assert.equal(r.spool.applyProposal(roll, r.spool.registers).status, Status.OK);
  r.spool.apply(Buffer.from(text));
  assert.equal(r.spool.applyProposal(r.spool.next(), r.spool.registers).status, Status.OK);
}

it('a flush rolls a spool with content at its end and waits until it and earlier spools are stored', async () => {
  const open = (url: string) => new FileStore(url, { root });
  const r = new Replica(spec('flush/one', 1024n), { openStore: open, persister: new Persister({ openStore: open }), fileOnly: false, log: new Logger('error') });
  try {
    await r.loaded;
    // An empty spool: nothing to roll, nothing known to be stored.
    assert.ok(fragmentEquals(r.flushProposal(), r.spool.fragment));
    assert.equal(r.lastPersisted(), undefined);

    // A first spool longer than the fragment length rolls on the next append (its persisting
    // runs on its own); the second is closed by the flush.
    commit(r, 'x'.repeat(1100));
    commit(r, 'second spool');
    const p = r.flushProposal();
    assert.equal(p.begin, 1112n);
    assert.equal(p.end, 1112n);
    const completed = r.spool.applyProposal(p, r.spool.registers).completed;
    assert.ok(completed);
    assert.equal(completed.fragment.begin, 1100n);

    const stored = await r.persisted(completed);
    await r.allPersisted();
    assert.ok(stored);
    assert.equal(stored.backing_store, 'file:///store/');
    assert.ok(stored.mod_time > 0n);
    assert.equal(stored.end, 1112n);
    assert.ok(existsSync(join(root, 'store', fragmentContentPath(stored))));
    // The earlier spool is stored too, and the index serves both from the store.
    const inIndex = r.index.fragments();
    assert.deepEqual(inIndex.map((f) => [f.begin, f.end, f.backing_store]), [[0n, 1100n, 'file:///store/'], [1100n, 1112n, 'file:///store/']]);
    assert.ok(fragmentEquals(r.lastPersisted()!, stored));
    // Flushing again: the spool is empty, nothing rolls.
    assert.ok(fragmentEquals(r.flushProposal(), r.spool.fragment));
  } finally {
    r.close();
  }
});
