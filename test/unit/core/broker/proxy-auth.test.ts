// A broker proxying a call signs it with its own key; when the peer refuses that token, the fault
// is between the brokers (different --broker.auth-keys), not in the operator's token. The proxy
// says which peer refused, and gazctl's hint names the brokers' keys instead of gazctl's options.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';

import { grpcError, proxyFragments } from '../../../../src/core/broker/proxy.js';
import type { Peers } from '../../../../src/core/broker/peers.js';
import { startJournalStub, stubHeader, type StubServer } from '../../../../src/testing/stubs.js';
import { runGazctl } from '../../../helpers/cli.js';

function refusal(details: string): ServiceError {
  return Object.assign(new Error(`16 UNAUTHENTICATED: ${details}`), { code: GrpcStatus.UNAUTHENTICATED, details, metadata: new Metadata() }) as ServiceError;
}

describe('a peer refusing a proxied call', () => {
  test('the error names the peer and the brokers\u2019 keys; other statuses pass through unchanged', async () => {
    const peers = {
      client: () => ({
        listFragments: (_req: unknown, _md: unknown, cb: (err: ServiceError | null) => void) => cb(refusal('verifying Authorization: token signature is invalid: signature is invalid')),
      }),
      metadata: () => new Metadata(),
    } as unknown as Peers;
    await assert.rejects(
      proxyFragments(peers, [{ endpoint: 'http://peer-b:8080', header: stubHeader() }], { journal: 'a/b' } as never),
      (e: Partial<ServiceError>) => {
        assert.equal(e.code, GrpcStatus.UNAUTHENTICATED);
        assert.match(e.details!, /^peer broker http:\/\/peer-b:8080 refused this broker's proxied call \(brokers must share --broker\.auth-keys\): verifying Authorization: token signature is invalid/);
        return true;
      },
    );
    const other = grpcError(Object.assign(new Error('x'), { code: GrpcStatus.NOT_FOUND, details: 'gone' }), 'http://peer-b:8080');
    assert.equal(other.details, 'gone');
  });

  describe('gazctl', () => {
    let broker: StubServer;
    before(async () => {
      broker = await startJournalStub({
        list: (call) => {
          const md = new Metadata();
          call.emit('error', Object.assign(grpcError(refusal('missing or empty Authorization token'), 'http://peer-b:8080'), { metadata: md }));
        },
      });
    });
    after(() => broker.stop());

    test('one line, pointing at the brokers\u2019 keys rather than gazctl\u2019s', async () => {
      const r = await runGazctl(['journals', 'list', '--broker.address', broker.address, '--timeout', '5s']);
      assert.equal(r.code, 1, r.stderr);
      const lines = r.stderr.trim().split('\n');
      assert.equal(lines.length, 1, r.stderr);
      assert.match(lines[0]!, /peer broker http:\/\/peer-b:8080 refused this broker's proxied call/);
      assert.match(lines[0]!, /give every broker the same --broker\.auth-keys/);
      assert.doesNotMatch(lines[0]!, /--broker\.auth-token/);
    });
  });
});
