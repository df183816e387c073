// Kubernetes-first default addresses (docs/divergences.md D79): with nothing configured, gazctl
// dials the Service names `gazette` and `consumer`; where such a name does not resolve (an
// operator's laptop) the command fails at once with one line that says so and names what to set,
// instead of retrying until --timeout runs out.
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { describe, it } from 'node:test';

import { DEFAULT_ADDRESSES, unresolvedHint } from '../../../src/cli/base.js';
import { nameMissing } from '../../../src/lib/client/transport-diagnosis.js';
import { describeInProcess, runInProcess } from '../../helpers/inproc.js';

/** Why this machine cannot show the failure (the name resolves here), or undefined. */
async function resolves(host: string): Promise<string | undefined> {
  try {
    const a = await lookup(host);
    return `"${host}" resolves to ${a.address} on this machine`;
  } catch {
    return undefined;
  }
}

describe('default service addresses', () => {
  it('are the Kubernetes Service names of upstream\'s manifests', () => {
    assert.deepEqual(DEFAULT_ADDRESSES, { broker: 'http://gazette:8080', consumer: 'http://consumer:8080' });
  });

  it('the hint names the flag, the variable and print-config; for a configured address, where it came from', () => {
    const d = unresolvedHint('broker', { from: 'default' });
    assert.match(d, /http:\/\/gazette:8080 is the default broker address/);
    assert.match(d, /--broker\.address or BROKER_ADDRESS/);
    assert.match(d, /gazctl print-config/);
    assert.match(unresolvedHint('consumer', { from: 'environment', variable: 'CONSUMER_ADDRESS' }), /comes from \$CONSUMER_ADDRESS/);
    assert.match(unresolvedHint('broker', { from: 'gazctl.ini', path: '/x/gazctl.ini', section: 'journals.Broker' }), /comes from \/x\/gazctl\.ini \[journals\.Broker\]/);
  });

  it('nameMissing: a reserved .invalid name does not exist; localhost does', async () => {
    assert.equal(await nameMissing('no-such-host.invalid'), true);
    assert.equal(await nameMissing('localhost'), false);
  });

  for (const [svc, args] of [
    ['broker', ['journals', 'list']],
    ['consumer', ['shards', 'list']],
  ] as const) {
    it(`${args.join(' ')} with no configuration: one line, exit 1, naming --${svc}.address, not a wait for --timeout`, async (t) => {
      const host = new URL(DEFAULT_ADDRESSES[svc]).hostname;
      const why = await resolves(host);
      if (why) return t.skip(why);
      // A long budget: a retried failure would end in "unreachable" after it, not in this message.
      const all = [...args, '--timeout', '10m'];
      const r = await runInProcess(all, { env: {} });
      assert.equal(r.code, 1, describeInProcess(all, r));
      const lines = r.stderr.trimEnd().split('\n');
      assert.equal(lines.length, 1, describeInProcess(all, r));
      assert.match(lines[0]!, new RegExp(`^gazctl: ${svc} ${DEFAULT_ADDRESSES[svc]}: host name "${host}" does not resolve \\(.*is the default ${svc} address.*--${svc}\\.address or ${svc.toUpperCase()}_ADDRESS.*gazctl print-config`), describeInProcess(all, r));
    });
  }

  it('a configured name that does not resolve names where it was set', async () => {
    const all = ['journals', 'list', '--timeout', '10m'];
    const r = await runInProcess(all, { env: { BROKER_ADDRESS: 'http://gazette.no-such-namespace.invalid:8080' } });
    assert.equal(r.code, 1, describeInProcess(all, r));
    assert.match(r.stderr, /host name "gazette\.no-such-namespace\.invalid" does not resolve \(the broker address comes from \$BROKER_ADDRESS/, describeInProcess(all, r));
  });
});
