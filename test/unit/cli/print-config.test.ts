// `gazctl print-config`, run in-process: the sections and values it prints, where it says each
// value came from, the masking of secrets, and its refusal of a value that does not parse.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { runInProcess } from '../../helpers/inproc.js';

/** The lines of one section (up to the next section). */
function section(out: string, name: string): string[] {
  const lines = out.split('\n');
  const at = lines.indexOf(`[${name}]`);
  assert.ok(at >= 0, `no [${name}] in:\n${out}`);
  const rest = lines.slice(at + 1);
  const end = rest.findIndex((l) => l.startsWith('['));
  return end < 0 ? rest : rest.slice(0, end);
}

/** A scratch directory holding `ini` as gazctl.ini (HOME points there too, so no other file is found). */
function withIni(ini: string): { cwd: string; env: Record<string, string> } {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-print-config-'));
  writeFileSync(join(dir, 'gazctl.ini'), ini);
  return { cwd: dir, env: { HOME: dir } };
}

describe('gazctl print-config', () => {
  it('prints every section in order, defaults commented out, and exits 0', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gazctl-print-config-'));
    const r = await runInProcess(['print-config'], { cwd: dir, env: { HOME: dir } });
    assert.equal(r.code, 0, r.stderr);
    const headers = r.stdout.split('\n').filter((l) => l.startsWith('['));
    assert.deepEqual(headers, [
      '[attach-uuids]',
      '[journals]',
      '[journals.Logging]',
      '[journals.Broker]',
      '[journals.append]',
      '[journals.apply]',
      '[journals.edit]',
      '[journals.flush]',
      '[journals.forks]',
      '[journals.fragments]',
      '[journals.list]',
      '[journals.prune]',
      '[journals.read]',
      '[journals.reset-head]',
      '[journals.store-health]',
      '[journals.suspend]',
      '[shards]',
      '[shards.Logging]',
      '[shards.Consumer]',
      '[shards.Broker]',
      '[shards.apply]',
      '[shards.edit]',
      '[shards.list]',
      '[shards.prune]',
      '[shards.recover]',
      '[shards.unassign]',
      '[health]',
      '[etcd]',
    ]);
    // Nothing is set: every value line is commented out.
    const values = r.stdout.split('\n').filter((l) => /^;? ?\w+ =/.test(l));
    assert.ok(values.length > 50, `${values.length} value lines`);
    assert.deepEqual(values.filter((l) => !l.startsWith('; ')), []);
    // Kubernetes-first defaults (D79), and every endpoint says where its value came from.
    for (const [sec, addr] of [['journals.Broker', 'http://gazette:8080'], ['shards.Broker', 'http://gazette:8080'], ['shards.Consumer', 'http://consumer:8080'], ['etcd', '']] as const) {
      const lines = section(r.stdout, sec);
      const at = lines.indexOf(addr === '' ? '; Address =' : `; Address = ${addr}`);
      assert.ok(at > 0, `${sec}:\n${lines.join('\n')}`);
      assert.equal(lines[at - 1], '; (from the default)', sec);
    }
    assert.ok(section(r.stdout, 'journals.Broker').includes('; TTL = 1m0s'));
    assert.ok(section(r.stdout, 'attach-uuids').includes('; Template = "{{.UUID}},{{.Line}}\\n"'));
    // No option that gazctl.ini cannot hold (shards edit's selector).
    assert.ok(!section(r.stdout, 'shards.edit').some((l) => /Selector/.test(l)));
  });

  it('says where each set value came from: the environment, a gazctl.ini section', async () => {
    const { cwd, env } = withIni('[journals.list]\nSelector = app=foo\nFormat = yaml\n[shards.Consumer]\nAddress = http://consumer.ns.svc:8080\n[journals]\nTimeout = 5m\n');
    const r = await runInProcess(['print-config'], { cwd, env: { ...env, BROKER_ADDRESS: 'http://broker.ns.svc:8080' } });
    assert.equal(r.code, 0, r.stderr);
    const broker = section(r.stdout, 'journals.Broker');
    const at = broker.indexOf('Address = http://broker.ns.svc:8080');
    assert.ok(at > 0, broker.join('\n'));
    assert.equal(broker[at - 1], '; (from $BROKER_ADDRESS)');
    // The shards group reads the same variable for its broker.
    assert.ok(section(r.stdout, 'shards.Broker').includes('Address = http://broker.ns.svc:8080'));
    const list = section(r.stdout, 'journals.list');
    assert.ok(list.includes('Selector = app=foo'), list.join('\n'));
    assert.ok(list.includes('Format = yaml'));
    assert.ok(list.includes(`; (from ${join(cwd, 'gazctl.ini')} [journals.list])`));
    const consumer = section(r.stdout, 'shards.Consumer');
    assert.ok(consumer.includes('Address = http://consumer.ns.svc:8080'), consumer.join('\n'));
    // A duration is shown as Go prints it.
    assert.ok(section(r.stdout, 'journals').includes('Timeout = 5m0s'));
    // A value equal to the default is commented out wherever it came from.
    const { cwd: cwd2, env: env2 } = withIni('[journals.list]\nFormat = table\n');
    const r2 = await runInProcess(['print-config'], { cwd: cwd2, env: env2 });
    assert.ok(section(r2.stdout, 'journals.list').includes('; Format = table'));
  });

  it('masks auth keys and tokens, and says that they are set', async () => {
    const { cwd, env } = withIni('[shards.Consumer]\nAuthToken = sekret-token\n');
    const r = await runInProcess(['print-config'], { cwd, env: { ...env, BROKER_AUTH_KEYS: 'c2VrcmV0LWtleQ==' } });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(!r.stdout.includes('sekret-token'));
    assert.ok(!r.stdout.includes('c2VrcmV0LWtleQ=='));
    assert.ok(section(r.stdout, 'shards.Consumer').includes('AuthToken = <masked>'));
    assert.ok(section(r.stdout, 'journals.Broker').includes('AuthKeys = <masked>'));
    assert.ok(section(r.stdout, 'journals.Broker').includes('; AuthToken ='));
  });

  it('refuses a value that does not parse with one line and exit 2', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gazctl-print-config-'));
    const r = await runInProcess(['print-config'], { cwd: dir, env: { HOME: dir, BROKER_CACHE_TTL: 'soon' } });
    assert.equal(r.code, 2, r.stdout);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /--broker\.cache\.ttl: invalid duration "soon".*\$BROKER_CACHE_TTL/);
  });
});
