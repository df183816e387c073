// `print-config` of ours against the reference Go gazctl's, from the same gazctl.ini and
// environment: every section and field Go prints is printed by ours too, in the same order, set
// or commented out alike, with the same value (auth secrets excepted: ours masks them). Ours
// has sections and fields Go lacks (our own commands and options) and different descriptions.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { runGoGazctl } from '../../src/testing/gazctl-go.js';
import { describeResult, runGazctl } from '../helpers/cli.js';

interface Entry {
  section: string;
  field: string;
  set: boolean;
  value: string;
}

/** The value lines of gazctl.ini text, commented or not, in order (description comments dropped). */
function entries(text: string): Entry[] {
  const out: Entry[] = [];
  let section = '';
  for (const line of text.split('\n')) {
    const h = /^\[(.+)\]$/.exec(line);
    if (h) {
      section = h[1]!;
      continue;
    }
    const m = /^(; )?([A-Z][A-Za-z]*) =(?: (.*))?$/.exec(line);
    if (m) out.push({ section, field: m[2]!, set: m[1] === undefined, value: m[3] ?? '' });
  }
  return out;
}

const INI = `[journals.list]
Selector = app=foo
Format = yaml
[journals.Broker]
Size = 10
[shards.Consumer]
Address = http://consumer.ns.svc:8080
AuthToken = sekret
[shards.prune]
DryRun = true
[attach-uuids]
SkipHeader = true
`;

async function both(env: Record<string, string>): Promise<{ go: Entry[]; ours: Entry[]; oursText: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'gazctl-print-config-'));
  writeFileSync(join(dir, 'gazctl.ini'), INI);
  const e = { HOME: dir, ...env };
  const go = await runGoGazctl(['print-config'], { cwd: dir, env: e });
  assert.equal(go.code, 0, go.stderr);
  const ours = await runGazctl(['print-config'], { cwd: dir, env: e });
  assert.equal(ours.code, 0, describeResult(['print-config'], ours));
  return { go: entries(go.stdout.toString()), ours: entries(ours.stdout.toString()), oursText: ours.stdout.toString() };
}

describe('print-config parity with the reference Go gazctl', () => {
  it('prints what Go prints for the same gazctl.ini and environment, in the same order', async () => {
    const { go, ours, oursText } = await both({ BROKER_ADDRESS: 'http://broker.ns.svc:8080', LOG_LEVEL: 'info', CONSUMER_CACHE_TTL: '90s' });
    assert.ok(go.length > 40, `Go printed ${go.length} values`);
    const key = (e: Entry) => `${e.section} ${e.field}`;
    const mine = new Map(ours.map((e) => [key(e), e]));
    let last = -1;
    for (const g of go) {
      const o = mine.get(key(g));
      assert.ok(o, `ours has no ${key(g)}`);
      const at = ours.indexOf(o);
      assert.ok(at > last, `${key(g)} is out of Go's order`);
      last = at;
      assert.equal(o.set, g.set, `${key(g)}: set ${o.set}, Go ${g.set}`);
      if (g.field === 'AuthToken' || g.field === 'AuthKeys') {
        assert.equal(o.value, g.value === '' ? '' : '<masked>', key(g));
      } else {
        assert.equal(o.value, g.value, `${key(g)}: ${o.value} against Go's ${g.value}`);
      }
    }
    // The values set above show as set in both, and ours never prints the token.
    for (const k of ['journals.list Selector', 'journals.Broker Size', 'journals.Broker Address', 'shards.Logging Level', 'shards.Consumer TTL', 'shards.prune DryRun', 'attach-uuids SkipHeader']) {
      assert.equal(mine.get(k)?.set, true, k);
    }
    assert.ok(!oursText.includes('sekret'));
  });
});
