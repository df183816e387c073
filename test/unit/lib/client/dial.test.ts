import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ConnectionPool } from '../../../../src/lib/client/dial.js';

describe('ConnectionPool.connect', () => {
  it('starts dialing the service address before any call', () => {
    const pool = new ConnectionPool({ address: 'http://127.0.0.1:1' });
    try {
      assert.equal(pool.state('http://127.0.0.1:1'), 'none');
      pool.connect();
      assert.notEqual(pool.state('http://127.0.0.1:1'), 'none');
      assert.notEqual(pool.state('http://127.0.0.1:1'), 'idle');
    } finally {
      pool.close();
    }
  });
  it('leaves a problem to the first call instead of throwing', () => {
    const pool = new ConnectionPool({ address: 'https://127.0.0.1:1', certFile: '/nonexistent/cert.pem', certKeyFile: '/nonexistent/key.pem' });
    try {
      pool.connect();
      assert.equal(pool.state('https://127.0.0.1:1'), 'none');
      assert.throws(() => pool.journal(), /reading certificate file \/nonexistent\/cert.pem/);
    } finally {
      pool.close();
    }
  });
  it('does nothing on a closed pool', () => {
    const pool = new ConnectionPool({ address: 'http://127.0.0.1:1' });
    pool.close();
    pool.connect();
    assert.equal(pool.state('http://127.0.0.1:1'), 'none');
  });
});
