// --socks-server as an option: from the command line, gazctl.ini ([journals] / [shards]
// SocksServer) or, as in a pod, SOCKS_SERVER_SERVICE_HOST and _PORT together; print-config
// shows it and where it came from; a malformed or half-set value is a usage error (exit 2).
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { runInProcess } from '../../helpers/inproc.js';

function section(out: string, name: string): string[] {
  const lines = out.split('\n');
  const at = lines.indexOf(`[${name}]`);
  assert.ok(at >= 0, `no [${name}] in:\n${out}`);
  const rest = lines.slice(at + 1);
  const end = rest.findIndex((l) => l.startsWith('['));
  return end < 0 ? rest : rest.slice(0, end);
}

function scratch(ini?: string): { cwd: string; env: Record<string, string> } {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-socks-opt-'));
  if (ini !== undefined) writeFileSync(join(dir, 'gazctl.ini'), ini);
  return { cwd: dir, env: { HOME: dir } };
}

const POD = { SOCKS_SERVER_SERVICE_HOST: '10.96.0.12', SOCKS_SERVER_SERVICE_PORT: '1080' };

describe('--socks-server', () => {
  it('is unset by default: print-config comments it out', async () => {
    const { cwd, env } = scratch();
    const r = await runInProcess(['print-config'], { cwd, env });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(section(r.stdout, 'journals').includes('; SocksServer ='), section(r.stdout, 'journals').join('\n'));
    assert.ok(section(r.stdout, 'shards').includes('; SocksServer ='));
  });

  it("comes from a pod's SOCKS_SERVER_SERVICE_HOST and _PORT, and print-config says so", async () => {
    const { cwd, env } = scratch();
    const r = await runInProcess(['print-config'], { cwd, env: { ...env, ...POD } });
    assert.equal(r.code, 0, r.stderr);
    for (const group of ['journals', 'shards']) {
      const lines = section(r.stdout, group);
      const at = lines.indexOf('SocksServer = 10.96.0.12:1080');
      assert.ok(at > 0, lines.join('\n'));
      assert.equal(lines[at - 1], '; (from $SOCKS_SERVER_SERVICE_HOST:$SOCKS_SERVER_SERVICE_PORT)');
    }
    // An IPv6 service address is bracketed.
    const r6 = await runInProcess(['print-config'], { cwd, env: { ...env, SOCKS_SERVER_SERVICE_HOST: 'fd00::12', SOCKS_SERVER_SERVICE_PORT: '1080' } });
    assert.ok(section(r6.stdout, 'journals').includes('SocksServer = [fd00::12]:1080'), r6.stdout);
  });

  it('gazctl.ini wins over the environment, as for every option', async () => {
    const { cwd, env } = scratch('[journals]\nSocksServer = bastion.example:1080\n');
    const r = await runInProcess(['print-config'], { cwd, env: { ...env, ...POD } });
    assert.equal(r.code, 0, r.stderr);
    const lines = section(r.stdout, 'journals');
    const at = lines.indexOf('SocksServer = bastion.example:1080');
    assert.ok(at > 0, lines.join('\n'));
    assert.equal(lines[at - 1], `; (from ${join(cwd, 'gazctl.ini')} [journals])`);
    // [shards] is its own section: the environment still sets it there.
    assert.ok(section(r.stdout, 'shards').includes('SocksServer = 10.96.0.12:1080'));
  });

  it('refuses half of the pair, and a malformed address, with one line and exit 2', async () => {
    const { cwd, env } = scratch();
    const half = await runInProcess(['journals', 'list'], { cwd, env: { ...env, SOCKS_SERVER_SERVICE_HOST: '10.96.0.12' } });
    assert.equal(half.code, 2, half.stderr);
    assert.equal(half.stderr.trim().split('\n').length, 1, half.stderr);
    assert.match(half.stderr, /--socks-server: \$SOCKS_SERVER_SERVICE_HOST is set but \$SOCKS_SERVER_SERVICE_PORT is not \(both are needed\)/);
    const bad = await runInProcess(['journals', 'list', '--socks-server', 'bastion'], { cwd, env });
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /--socks-server: SOCKS server "bastion": missing port \(expected host:port\)/);
    const badEnv = await runInProcess(['print-config'], { cwd, env: { ...env, SOCKS_SERVER_SERVICE_HOST: '10.96.0.12', SOCKS_SERVER_SERVICE_PORT: 'socks' } });
    assert.equal(badEnv.code, 2, badEnv.stderr);
    assert.match(badEnv.stderr, /--socks-server: .*\(from \$SOCKS_SERVER_SERVICE_HOST:\$SOCKS_SERVER_SERVICE_PORT\)/);
  });
});
