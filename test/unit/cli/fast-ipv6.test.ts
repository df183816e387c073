// The CLI's net.isIPv6 (src/cli/fast-ipv6.ts) must answer exactly as Node's, for IPv6 literals,
// IPv4 addresses, host names and odd input alike. Compared in a Node of its own, where Node's
// original is kept before the replacement goes in.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { test } from 'node:test';

const MODULE = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'src', 'cli', 'fast-ipv6.js');

test("net.isIPv6 answers as Node's own check, and without it for strings with no ':'", async () => {
  const script = `
    const net = (await import('node:net')).default;
    const nodeIsIPv6 = net.isIPv6;
    let nodeCalls = 0;
    net.isIPv6 = (s) => { nodeCalls++; return nodeIsIPv6(s); };
    const { installFastIsIPv6 } = await import(${JSON.stringify(MODULE)});
    installFastIsIPv6();
    const inputs = ['127.0.0.1', 'localhost', 'broker.example', '', '::', '::1', 'fe80::1%eth0', '2001:db8::8a2e:370:7334',
      '::ffff:127.0.0.1', '1::2::3', ':', 'a:b', '[::1]', '127.0.0.1:8080', 'gg::1', '1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8:9', ' ::1'];
    const odd = [undefined, null, 1, {}, { toString: () => '::1' }];
    const out = [];
    for (const x of [...inputs, ...odd]) {
      nodeCalls = 0;
      out.push({ x: String(x), ours: net.isIPv6(x), node: nodeIsIPv6(x), askedNode: nodeCalls > 0, string: typeof x === 'string' });
    }
    console.log(JSON.stringify(out));
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  const rows = JSON.parse(stdout) as { x: string; ours: boolean; node: boolean; askedNode: boolean; string: boolean }[];
  for (const r of rows) {
    assert.equal(r.ours, r.node, `isIPv6(${r.x})`);
    if (r.string && !r.x.includes(':')) assert.equal(r.askedNode, false, `isIPv6(${r.x}) answered without Node's check`);
    else assert.equal(r.askedNode, true, `isIPv6(${r.x}) goes to Node's check`);
  }
  assert.ok(rows.some((r) => r.node), 'some inputs are IPv6 addresses');
});
