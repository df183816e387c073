// Hints of a shard in a real etcd: keys as upstream names them, primary hints guarded on the
// assignment, backups rotated at each recovery (the oldest falls off), stored values validated
// on read (a bad value is an error naming its key), JSON as Go writes it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Keyspace } from '../../src/lib/keyspace/client.js';
import { ShardSpec } from '../../src/lib/protocol/gen/consumer/protocol.js';
import type { FSMHints } from '../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import {
  fetchHints,
  hintBackupKeys,
  hintPrimaryKey,
  hintsResponse,
  pickFirstHints,
  primaryHintsPut,
  shardRecoveryLog,
  storeRecordedHints,
  storeRecoveredHints,
} from '../../src/core/consumer/hints.js';
import { startEtcd, type EtcdProcess } from '../../src/testing/index.js';

const spec = ShardSpec.fromPartial({ id: 'sums-007', recovery_log_prefix: 'sums/recovery', hint_prefix: '/gazette/hints/sums', hint_backups: 3 });
const LOG = 'sums/recovery/sums-007';

function hintsAt(seq: bigint): FSMHints {
  return {
    log: LOG,
    live_nodes: [{ fnode: seq, segments: [{ author: 7, first_seq_no: seq, first_offset: seq * 10n, first_checksum: 1, last_seq_no: seq + 2n, last_offset: 0n, log: '' }] }],
    properties: [],
  };
}

describe('consumer hints in etcd', { timeout: 60_000 }, () => {
  let etcd: EtcdProcess | undefined;
  let ks: Keyspace;

  before(async () => {
    etcd = await startEtcd();
    ks = new Keyspace({ endpoints: etcd.endpoint });
  });
  after(async () => {
    ks?.close();
    await etcd?.stop();
  });

  test('keys are named as upstream', () => {
    assert.equal(shardRecoveryLog(spec), LOG);
    assert.equal(shardRecoveryLog({ ...spec, recovery_log_prefix: '' }), '');
    assert.equal(hintPrimaryKey(spec), '/gazette/hints/sums/sums-007.primary');
    assert.deepEqual(hintBackupKeys(spec), ['/gazette/hints/sums/sums-007.backup.0', '/gazette/hints/sums/sums-007.backup.1', '/gazette/hints/sums/sums-007.backup.2']);
  });

  test('recorded hints are guarded on the assignment; recovered hints rotate through the backups', async () => {
    const asnKey = '/gazette/consumers/sums/assign/sums-007#zone#member#0';
    await ks.put(asnKey, '');
    const asn = { key: asnKey, createRevision: (await ks.get(asnKey))!.createRevision };

    let fetched = await fetchHints(ks, spec);
    assert.deepEqual([fetched.primary, ...fetched.backups], [undefined, undefined, undefined, undefined]);
    assert.deepEqual(pickFirstHints(fetched, LOG), { log: LOG, live_nodes: [], properties: [] });

    for (const seq of [1n, 4n, 7n, 10n]) await storeRecoveredHints(ks, spec, asn, hintsAt(seq));
    fetched = await fetchHints(ks, spec);
    assert.deepEqual(fetched.backups, [hintsAt(10n), hintsAt(7n), hintsAt(4n)], 'newest first; the oldest fell off');
    assert.deepEqual(pickFirstHints(fetched, LOG), hintsAt(10n), 'no primary: the newest backup');

    assert.equal(await storeRecordedHints(ks, spec, asn, hintsAt(13n)), true);
    // Go's JSON: snake_case, zero fields omitted, the segment's log left out (it is the hints' log).
    assert.equal(
      (await ks.get(hintPrimaryKey(spec)))!.value.toString(),
      '{"log":"sums/recovery/sums-007","live_nodes":[{"fnode":13,"segments":[{"author":7,"first_seq_no":13,"first_offset":130,"first_checksum":1,"last_seq_no":15}]}],"properties":null}',
    );
    fetched = await fetchHints(ks, spec);
    assert.deepEqual(pickFirstHints(fetched, LOG), hintsAt(13n));
    const resp = hintsResponse(fetched);
    assert.deepEqual(resp.primary_hints, { hints: hintsAt(13n) });
    assert.deepEqual(resp.backup_hints.map((b) => b.hints?.live_nodes[0]?.fnode), [10n, 7n, 4n]);

    // Once the assignment is gone (or re-created), neither is written.
    await ks.delete(asnKey);
    assert.equal(await storeRecordedHints(ks, spec, asn, hintsAt(16n)), false);
    await assert.rejects(storeRecoveredHints(ks, spec, asn, hintsAt(16n)), /assignment or a backup hints key changed/);
    assert.deepEqual((await fetchHints(ks, spec)).primary, hintsAt(13n));

    // An Apply carrying primary hints writes the same value.
    const put = primaryHintsPut(spec, hintsAt(13n));
    assert.deepEqual(put, { put: hintPrimaryKey(spec), value: (await ks.get(hintPrimaryKey(spec)))!.value.toString() });
  });

  test('a stored value that does not validate is an error naming its key', async () => {
    await ks.put(hintBackupKeys(spec)[1]!, JSON.stringify({ log: 'other/log', live_nodes: null, properties: null }));
    await assert.rejects(fetchHints(ks, spec), /hints at \/gazette\/hints\/sums\/sums-007\.backup\.1: hints name log other\/log, expected sums\/recovery\/sums-007/);
    await ks.put(hintBackupKeys(spec)[1]!, '{"log":');
    await assert.rejects(fetchHints(ks, spec), /hints at \/gazette\/hints\/sums\/sums-007\.backup\.1: hints are not valid JSON/);
  });
});
