import assert from 'node:assert/strict';
import { request } from 'node:http';
import { connect, type ClientHttp2Session } from 'node:http2';
import { after, before, describe, it } from 'node:test';

import { CONNECTION_WINDOW_BYTES, startServer, STREAM_WINDOW_BYTES, type ServiceServer } from '../../../../src/core/broker/server.js';
import { Metrics } from '../../../../src/core/broker/metrics.js';
import type { JournalServer } from '../../../../src/lib/protocol/gen/broker/protocol.js';

describe('broker service port', () => {
  let server: ServiceServer;
  before(async () => {
    server = await startServer({ host: '127.0.0.1', port: 0, journal: {} as JournalServer, metrics: new Metrics(), ready: () => true, maxRecvBytes: 1 << 20 });
  });
  after(() => server.close());

  it('gives HTTP/2 clients receive windows larger than the protocol default', async () => {
    const session: ClientHttp2Session = connect(`http://127.0.0.1:${server.port}`);
    try {
      await new Promise<void>((resolve, reject) => {
        session.once('remoteSettings', () => resolve());
        session.once('error', reject);
      });
      // The server raises its windows with a second SETTINGS frame and a WINDOW_UPDATE, both
      // sent before its answer to our ping.
      await new Promise<void>((resolve, reject) => session.ping((e) => (e ? reject(e) : resolve())));
      assert.equal(session.remoteSettings.initialWindowSize, STREAM_WINDOW_BYTES);
      assert.equal(session.state.remoteWindowSize, CONNECTION_WINDOW_BYTES);
    } finally {
      session.close();
    }
  });

  it('still answers HTTP/1 on the same port', async () => {
    const body = await new Promise<string>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: server.port, path: '/debug/ready' }, (res) => {
        let b = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (b += d));
        res.on('end', () => resolve(`${res.statusCode} ${b}`));
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(body, '200 ready\n');
  });
});
