import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ValidationError } from '../../../../src/lib/protocol/errors.js';
import { Route } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import {
  emptyRoute,
  formatProcessID,
  memberEndpoint,
  memberIndex,
  parseEndpoint,
  routeEquals,
  routePrimary,
  routeReplicas,
} from '../../../../src/lib/protocol/route.js';

const a = { zone: 'us-east', suffix: 'broker-a' };
const b = { zone: 'us-east', suffix: 'broker-b' };
const c = { zone: 'us-west', suffix: 'broker-c' };

describe('routes', () => {
  it('has an empty route with primary -1 that survives the wire', () => {
    const r = emptyRoute();
    assert.deepEqual(r, { members: [], primary: -1, endpoints: [] });
    assert.equal(Route.decode(Route.encode(r).finish()).primary, -1);
    assert.equal(routePrimary(r), undefined);
    assert.deepEqual(routeReplicas(r), []);
  });
  it('finds the primary, replicas, endpoints and member indexes', () => {
    const r: Route = { members: [a, b, c], primary: 1, endpoints: ['http://a:8080', '', 'https://c'] };
    assert.deepEqual(routePrimary(r), b);
    assert.deepEqual(routeReplicas(r), [a, c]);
    assert.equal(memberEndpoint(r, 0), 'http://a:8080');
    assert.equal(memberEndpoint(r, 1), undefined);
    assert.equal(memberEndpoint({ ...r, endpoints: [] }, 0), undefined);
    assert.equal(memberIndex(r, c), 2);
    assert.equal(memberIndex(r, { zone: 'x', suffix: 'y' }), -1);
  });
  it('compares members and primary, not endpoints', () => {
    const r: Route = { members: [a, b], primary: 0, endpoints: [] };
    assert.equal(routeEquals(r, { members: [{ ...a }, { ...b }], primary: 0, endpoints: ['http://x:1', 'http://y:2'] }), true);
    assert.equal(routeEquals(r, { ...r, primary: 1 }), false);
    assert.equal(routeEquals(r, { ...r, members: [a, c] }), false);
    assert.equal(routeEquals(r, { ...r, members: [a] }), false);
    assert.equal(routeEquals(undefined, emptyRoute()), true);
  });
  it('formats process IDs for humans', () => {
    assert.equal(formatProcessID(a), 'us-east/broker-a');
    assert.equal(formatProcessID({ zone: '', suffix: 'solo' }), 'solo');
    assert.equal(formatProcessID(undefined), '');
  });
});

describe('parseEndpoint', () => {
  it('maps endpoints to dial targets', () => {
    assert.deepEqual(parseEndpoint('http://localhost:8080'), { target: 'localhost:8080', secure: false });
    assert.deepEqual(parseEndpoint('http://broker'), { target: 'broker:80', secure: false });
    assert.deepEqual(parseEndpoint('https://broker'), { target: 'broker:443', secure: true });
    assert.deepEqual(parseEndpoint('https://broker:9443/'), { target: 'broker:9443', secure: true });
    assert.deepEqual(parseEndpoint('http://broker:80'), { target: 'broker:80', secure: false });
    assert.deepEqual(parseEndpoint('http://[::1]:8080'), { target: '[::1]:8080', secure: false });
    assert.deepEqual(parseEndpoint('unix://localhost/tmp/gazette.sock'), {
      target: 'unix:///tmp/gazette.sock',
      secure: false,
      unixPath: '/tmp/gazette.sock',
    });
  });
  it('rejects invalid endpoints naming them', () => {
    for (const [ep, re] of [
      ['localhost:8080', /unsupported scheme "localhost"/],
      ['not a url', /not an absolute URL/],
      ['ftp://host', /unsupported scheme "ftp"/],
      ['unix:///tmp/sock', /unix endpoint needs a host/],
      ['unix://host', /absolute socket path/],
    ] as const) {
      assert.throws(
        () => parseEndpoint(ep),
        (e: unknown) => e instanceof ValidationError && e.message.startsWith(`endpoint ${JSON.stringify(ep)}: `) && re.test(e.message),
        ep,
      );
    }
  });
});
