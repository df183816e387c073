// Reads through the keyspace client are retried while etcd answers UNAVAILABLE, until the call
// timeout; writes are not (one may have been applied). After an etcd restart grpc-js can fail
// calls at once while its channel reconnects: a consumer's GetHints failed so in CI
// ("etcd get …: 14 UNAVAILABLE: No connection established") right after a 15 s etcd outage.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GRPCUnavailableError, GRPCInvalidArgumentError } from 'etcd3';

import { Keyspace } from '../../../../src/lib/keyspace/index.js';

/** A client on an address nothing is asked of: its kv stub is replaced by `kv`. */
function client(kv: Record<string, (...a: unknown[]) => Promise<unknown>>, callTimeoutMs = 2000): Keyspace {
  const ks = new Keyspace({ endpoints: 'http://127.0.0.1:1', callTimeoutMs });
  (ks as unknown as { rpc: { kv: unknown } }).rpc.kv = kv;
  return ks;
}

const header = { revision: '7', cluster_id: '1', member_id: '1', raft_term: '1' };

describe('keyspace reads retry UNAVAILABLE within the call timeout', { timeout: 30_000 }, () => {
  test('a get that meets UNAVAILABLE twice is answered by its third attempt', async () => {
    let n = 0;
    const ks = client({
      range: async () => {
        if (++n <= 2) throw new GRPCUnavailableError('14 UNAVAILABLE: No connection established. Last error: null');
        return { header, kvs: [{ key: Buffer.from('/k'), value: Buffer.from('v'), create_revision: '5', mod_revision: '6', version: '1', lease: '0' }], count: '1', more: false };
      },
    });
    try {
      const kv = await ks.get('/k');
      assert.equal(kv?.value.toString(), 'v');
      assert.equal(n, 3);
    } finally {
      ks.close();
    }
  });

  test('a write meeting UNAVAILABLE fails at once', async () => {
    let n = 0;
    const ks = client({
      put: async () => {
        n++;
        throw new GRPCUnavailableError('14 UNAVAILABLE: No connection established');
      },
    });
    try {
      await assert.rejects(ks.put('/k', 'v'), /etcd put \/k: .*UNAVAILABLE/);
      assert.equal(n, 1);
    } finally {
      ks.close();
    }
  });

  test('other errors are not retried, and UNAVAILABLE gives up by the call timeout', async () => {
    let n = 0;
    const ks = client({
      range: async () => {
        n++;
        throw new GRPCInvalidArgumentError('3 INVALID_ARGUMENT: bad');
      },
    });
    await assert.rejects(ks.get('/k'), /INVALID_ARGUMENT/);
    assert.equal(n, 1);
    ks.close();

    let m = 0;
    const down = client({
      range: async () => {
        m++;
        throw new GRPCUnavailableError('14 UNAVAILABLE: No connection established');
      },
    }, 600);
    await assert.rejects(down.get('/k'), /etcd get \/k: .*UNAVAILABLE/);
    assert.ok(m > 1, `retried (${m} attempts)`);
    down.close();
  });
});
