// The wiring the module header describes, end to end on a file:// store: appends commit into the
// spool and the index serves them locally; a roll hands the fragment to the persister; once
// stored, the index serves it from the store, and a refresh finds the same object.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';

import {
  FragmentIndex,
  nextProposal,
  Persister,
  readLocal,
  Spool,
  walkAllStores,
  type LocalFragment,
} from '../../../../src/core/fragment/index.js';
import { nanosToDuration } from '../../../../src/lib/protocol/duration.js';
import { CompressionCodec, Status, type Fragment, type JournalSpec } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { FileStore } from '../../../../src/lib/stores/index.js';

const root = mkdtempSync(join(tmpdir(), 'wiring-test-'));
mkdirSync(join(root, 'store'));
after(() => rmSync(root, { recursive: true, force: true }));

it('append, serve locally, roll, persist, serve from the store', async () => {
  const J = 'wired/journal';
  const spec: JournalSpec = {
    name: J,
    replication: 1,
    labels: { labels: [] },
    fragment: {
      length: 20n,
      compression_codec: CompressionCodec.SNAPPY,
      stores: ['file:///store/'],
      refresh_interval: nanosToDuration(60_000_000_000n),
      retention: undefined,
      flush_interval: undefined,
      path_postfix_template: 'date={{ .Spool.FirstAppendTime.Format "2006-01-02" }}/',
    },
    flags: 0,
    max_append_rate: 0n,
    suspend: undefined,
  };
  const open = (url: string) => new FileStore(url, { root });
  const index = new FragmentIndex(J, { openStore: open });
  const persister = new Persister({ openStore: open });
  const persisted: Promise<Fragment | undefined>[] = [];
  const spool = new Spool(J, {
    now: () => new Date(Date.UTC(2024, 0, 31, 23, 59)),
    observer: {
      onCommit: (lf) => index.spoolCommit(lf),
      onComplete: (lf: LocalFragment) => void persisted.push(persister.persist(lf, spec)),
    },
  });

  const append = (text: string) => {
    const proposal = nextProposal(spool, spec.fragment!);
    assert.equal(spool.applyProposal(proposal, { labels: [] }).status, Status.OK);
    spool.apply(Buffer.from(text), 0);
    assert.equal(spool.applyProposal(spool.next(), { labels: [] }).status, Status.OK);
  };
  append('first append, ');
  append('second one.');
  // 25 bytes > length 20: the next append rolls the spool first.
  const local = await index.query({ offset: 6n });
  assert.equal(local.status, Status.OK);
  assert.ok(local.status === Status.OK && local.local);
  assert.equal(readLocal(local.local, 6n, 6).toString(), 'append');
  append('third');
  assert.equal(persisted.length, 1);
  const stored = await persisted[0]!;
  assert.ok(stored);
  assert.equal(stored.path_postfix, 'date=2024-01-31');
  index.addRemote(stored);

  const fromStore = await index.query({ offset: 6n });
  assert.equal(fromStore.status, Status.OK);
  if (fromStore.status !== Status.OK) return;
  assert.equal(fromStore.local, undefined);
  assert.equal(fromStore.fragment.backing_store, 'file:///store/');
  assert.equal(fromStore.fragment.compression_codec, CompressionCodec.SNAPPY);
  const tail = await index.query({ offset: 25n });
  assert.ok(tail.status === Status.OK && tail.local, 'the new spool is served locally');

  const listing = await walkAllStores(J, spec.fragment!.stores, open);
  assert.deepEqual(listing.members().map((f) => [f.begin, f.end, f.path_postfix]), [[0n, 25n, 'date=2024-01-31']]);
  index.replaceRemote(listing);
  assert.deepEqual(index.fragments().map((f) => [f.begin, f.end, f.backing_store]), [[0n, 25n, 'file:///store/'], [25n, 30n, '']]);
});
