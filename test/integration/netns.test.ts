// src/testing/netns.ts, the IP-level cut of the net-split tests: a process in the namespace and
// one on the host reach each other over the veth pair; a cut silences both directions (no
// refusal, no reset) except the ports it keeps; a connection that outlived the cut delivers
// what was written during it once the cut heals; stop() leaves no rule behind. Needs root.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';

import { pollUntil, probeTcp, spawnManaged, startNetns, type ManagedProcess, type Netns } from '../../src/testing/index.js';

const run = promisify(execFile);

describe('netns: a network namespace cut off from the host at the IP level', { timeout: 60_000 }, () => {
  let dir: string;
  let ns: Netns;
  let echo: ManagedProcess;
  let hostServer: net.Server;
  const ECHO_PORT = 7000;
  let hostPort = 0;
  /** A port of the host end's address nothing listens on. */
  let closedPort = 0;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gazctl-netns-'));
    ns = await startNetns({ logDir: dir });
    // An echo server in the namespace, on its address.
    const cmd = [...ns.wrap, process.execPath, '-e', `require('net').createServer((s) => s.pipe(s)).listen(${ECHO_PORT}, ${JSON.stringify(ns.address)}, () => console.log('listening'))`];
    echo = spawnManaged({ name: 'echo in netns', command: cmd[0]!, args: cmd.slice(1), logFile: join(dir, 'echo.log') });
    await pollUntil('the echo server', async () => (await probeTcp(ns.address, ECHO_PORT, { timeoutMs: 500 })) === 'connected', { timeoutMs: 10_000, intervalMs: 100, describe: () => echo.describe() });
    // A server on the host end's address, kept reachable through the cut.
    hostServer = net.createServer((s) => s.pipe(s));
    await new Promise<void>((resolve) => hostServer.listen(0, ns.hostAddress, resolve));
    hostPort = (hostServer.address() as net.AddressInfo).port;
    const spare = net.createServer();
    await new Promise<void>((resolve) => spare.listen(0, ns.hostAddress, resolve));
    closedPort = (spare.address() as net.AddressInfo).port;
    await new Promise((resolve) => spare.close(resolve));
  });

  after(async () => {
    await ns?.heal().catch(() => undefined);
    await echo?.stop('SIGKILL');
    hostServer?.close();
    await ns?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('the cut silences both directions but the kept port, and a held write arrives after the heal', async () => {
    const c = net.connect(ECHO_PORT, ns.address);
    const got: Buffer[] = [];
    c.on('data', (d: Buffer) => got.push(d));
    await new Promise<void>((resolve, reject) => c.once('connect', resolve).once('error', reject));
    c.write('before;');
    await pollUntil('the echo before the cut', async () => Buffer.concat(got).toString() === 'before;', { timeoutMs: 5000, intervalMs: 20 });

    await ns.cut({ except: [hostPort] });
    c.write('during;');
    assert.deepEqual(
      {
        'host -> namespace': await probeTcp(ns.address, ECHO_PORT, { timeoutMs: 1500 }),
        'namespace -> host': await probeTcp(ns.hostAddress, closedPort, { timeoutMs: 1500, wrap: ns.wrap }),
        'namespace -> kept port': await probeTcp(ns.hostAddress, hostPort, { timeoutMs: 1500, wrap: ns.wrap }),
      },
      { 'host -> namespace': 'silent', 'namespace -> host': 'silent', 'namespace -> kept port': 'connected' },
    );
    assert.equal(Buffer.concat(got).toString(), 'before;', 'nothing crossed the cut');

    await ns.heal();
    // TCP retransmits what the cut dropped (after its back-off: a few seconds here).
    await pollUntil('the write held by the cut to be echoed', async () => Buffer.concat(got).toString() === 'before;during;', { timeoutMs: 30_000, intervalMs: 50 });
    assert.equal(await probeTcp(ns.address, ECHO_PORT), 'connected');
    // Without a cut, an unused port of the host end's address is refused, not silent.
    assert.equal(await probeTcp(ns.hostAddress, closedPort, { wrap: ns.wrap }), 'refused');
    c.destroy();
  });

  test('stop() removes the host rules', async () => {
    const chains = async () => (await run('iptables-legacy', ['-w', '-S'])).stdout.split('\n').filter((l) => l.includes('gzns'));
    assert.notDeepEqual(await chains(), []);
    await ns.stop();
    assert.deepEqual(await chains(), []);
  });
});
