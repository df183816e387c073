// Parsing and printing of a SOCKS5 proxy address (src/lib/socks.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { formatSocksServer, parseSocksServer } from '../../../src/lib/socks.js';

describe('parseSocksServer', () => {
  it('takes host:port, [v6]:port, and a socks5h:// or socks5:// prefix; "" is no proxy', () => {
    assert.deepEqual(parseSocksServer('socks.bastion.svc:1080'), { host: 'socks.bastion.svc', port: 1080 });
    assert.deepEqual(parseSocksServer('10.0.0.7:1080'), { host: '10.0.0.7', port: 1080 });
    assert.deepEqual(parseSocksServer('[fd00::7]:1080'), { host: 'fd00::7', port: 1080 });
    assert.deepEqual(parseSocksServer('socks5h://bastion:9050'), { host: 'bastion', port: 9050 });
    assert.deepEqual(parseSocksServer('SOCKS5://bastion:9050/'), { host: 'bastion', port: 9050 });
    assert.equal(parseSocksServer(''), undefined);
    assert.equal(parseSocksServer('  '), undefined);
  });

  it('refuses anything else with one line naming the text', () => {
    const bad: [string, RegExp][] = [
      ['bastion', /SOCKS server "bastion": missing port \(expected host:port\)/],
      ['bastion:0', /port must be 1 to 65535/],
      ['bastion:70000', /port must be 1 to 65535/],
      ['bastion:socks', /not host:port/],
      ['fd00::7:1080', /not host:port/],
      ['[bastion]:1080', /brackets must hold an IPv6 address/],
      ['http://bastion:1080', /not host:port/],
      ['user@bastion:1080', /not host:port/],
    ];
    for (const [text, re] of bad) assert.throws(() => parseSocksServer(text), re, text);
  });

  it('prints host:port, an IPv6 host in brackets', () => {
    assert.equal(formatSocksServer({ host: 'bastion', port: 1080 }), 'bastion:1080');
    assert.equal(formatSocksServer({ host: 'fd00::7', port: 1080 }), '[fd00::7]:1080');
  });
});
