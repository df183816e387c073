import assert from 'node:assert/strict';
import { it } from 'node:test';

import * as protocol from '../../../../src/lib/protocol/index.js';

it('re-exports generated code, namespaces and extensions from one module', () => {
  assert.equal(protocol.Status.JOURNAL_NOT_FOUND, 1);
  assert.equal(protocol.consumer.Status.SHARD_NOT_FOUND, 1);
  assert.equal(protocol.consumer.ReplicaStatus_Code.PRIMARY, 300);
  assert.equal(protocol.formatGoDuration(60_000_000_000n), '1m0s');
  assert.equal(protocol.formatLabelSelector(protocol.parseLabelSelector('a1 in (x, y)')), 'a1 in (x,y)');
  assert.ok(new protocol.ValidationError('x') instanceof protocol.GazctlError);
  assert.equal(protocol.parseEndpoint('http://h').target, 'h:80');
  assert.equal(protocol.labelSetToJson(undefined), '{"labels":[]}');
});
