// While a broker cannot be reached, gazctl retries until --timeout runs out (30 s by default).
// On a terminal it says so once, early, instead of sitting silent; scripts (no terminal) still
// get the single error line at the end.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Metadata, status as GrpcStatus } from '@grpc/grpc-js';

import { unreachableNote } from '../../../src/cli/base.js';
import { TransportError } from '../../../src/lib/protocol/errors.js';
import { runGazctlOnTerminal } from '../../helpers/cli.js';

function grpcError(code: number, details: string): Error {
  return Object.assign(new Error(`${code} ${details}`), { code, details, metadata: new Metadata() });
}

const REFUSED = grpcError(GrpcStatus.UNAVAILABLE, 'No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1. Resolution note: x');
const svc = { address: 'http://127.0.0.1:1', timeoutMs: 30_000 };

describe('the notice while an unreachable broker is retried', () => {
  test('from the second failed attempt on a terminal: the address, the cause and how long', () => {
    assert.equal(unreachableNote(svc, REFUSED, 0, true), undefined, 'the first failure may be a blip');
    assert.equal(
      unreachableNote(svc, REFUSED, 1, true),
      'gazctl: broker http://127.0.0.1:1 is not answering (No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1.); retrying for up to 30s (--timeout), Ctrl-C to stop\n',
    );
  });

  test('the budget as a Go duration, as the flag takes it, and none with --timeout 0', () => {
    assert.match(unreachableNote({ ...svc, timeoutMs: 120_000 }, REFUSED, 1, true)!, /for up to 2m0s \(--timeout\)/);
    assert.match(unreachableNote({ ...svc, timeoutMs: 1500 }, REFUSED, 1, true)!, /for up to 1\.5s \(--timeout\)/);
    assert.match(unreachableNote({ ...svc, timeoutMs: 0 }, REFUSED, 1, true)!, /retrying until interrupted \(--timeout 0\)/);
  });

  test('a TransportError carrying UNAVAILABLE is described by its message', () => {
    const e = new TransportError('connection dropped', GrpcStatus.UNAVAILABLE);
    assert.match(unreachableNote(svc, e, 2, true)!, /is not answering \(connection dropped\)/);
  });

  test('nothing without a terminal, or for failures that are not about reaching the broker', () => {
    assert.equal(unreachableNote(svc, REFUSED, 3, false), undefined);
    assert.equal(unreachableNote(svc, grpcError(GrpcStatus.INVALID_ARGUMENT, 'bad'), 3, true), undefined);
    assert.equal(unreachableNote(svc, new Error('plain'), 3, true), undefined);
  });

  test('a real run on a terminal: the notice first, then the one error line when --timeout runs out', async () => {
    const args = ['journals', 'list', '--broker.address', 'http://127.0.0.1:1', '--timeout', '2s'];
    const r = await runGazctlOnTerminal(args, { prompt: /(?!)/, answer: '', timeoutMs: 30_000 });
    assert.equal(r.code, 1, r.screen);
    const lines = r.screen.split(/\r?\n/).filter((l) => l.trim() !== '');
    assert.equal(lines.length, 2, r.screen);
    assert.match(lines[0]!, /^gazctl: broker http:\/\/127\.0\.0\.1:1 is not answering \(.*ECONNREFUSED.*\); retrying for up to 2s \(--timeout\), Ctrl-C to stop$/);
    assert.match(lines[1]!, /^gazctl: broker http:\/\/127\.0\.0\.1:1 is unreachable: /);
  });
});
