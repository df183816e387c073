// scripts/oclif-id-order.cjs sorts the bundle's oclif commands as localeCompare does, without
// an ICU collator for plain ids under a plain locale.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { test } from 'node:test';

import { REPO_ROOT } from '../helpers/cli.js';

const { idOrder } = createRequire(import.meta.url)(join(REPO_ROOT, 'scripts', 'oclif-id-order.cjs')) as {
  idOrder: (env: Record<string, string | undefined>) => (a: string, b: string) => number;
};

/** Random strings over `alphabet` (mostly its first letters, so that prefixes are shared). */
function ids(alphabet: string, n: number, seed = 7): string[] {
  let x = seed;
  const rnd = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    let s = '';
    const len = 1 + Math.floor(rnd() * 7);
    for (let j = 0; j < len; j++) s += alphabet[Math.floor(rnd() * (rnd() < 0.5 ? 3 : alphabet.length))];
    out.push(s);
  }
  return out;
}

test('plain ids under C, POSIX and English locales sort as those locales collate them', () => {
  const all = ids('abcdefghijklmnopqrstuvwxyz:-', 3000);
  for (const [env, locale] of [
    [{}, 'und'],
    [{ LANG: 'C' }, 'en-US-POSIX'],
    [{ LANG: 'C.UTF-8' }, 'en-US-POSIX'],
    [{ LC_ALL: 'POSIX' }, 'en-US-POSIX'],
    [{ LANG: 'en_US.UTF-8' }, 'en-US'],
    [{ LC_MESSAGES: 'en_GB.UTF-8' }, 'en-GB'],
  ] as const) {
    const order = idOrder(env);
    const collator = new Intl.Collator(locale);
    for (let i = 1; i < all.length; i++) {
      const [a, b] = [all[i - 1]!, all[i]!];
      assert.equal(Math.sign(order(a, b)), Math.sign(collator.compare(a, b)), `${JSON.stringify(env)}: ${a} vs ${b}`);
    }
  }
});

test('other ids, and other locales, are compared with localeCompare', () => {
  const calls: string[] = [];
  const real = String.prototype.localeCompare;
  String.prototype.localeCompare = function (this: string, that: string) {
    calls.push(`${this}|${that}`);
    return real.call(this, that);
  };
  try {
    idOrder({})('journals:list', 'journals:apply');
    assert.deepEqual(calls, []);
    idOrder({})('Journals:list', 'journals:apply');
    idOrder({})('journals:v2', 'journals:apply');
    idOrder({ LANG: 'da_DK.UTF-8' })('journals:aa', 'journals:z');
    idOrder({ LC_ALL: 'lt_LT.UTF-8', LANG: 'en_US.UTF-8' })('journals:y', 'journals:k');
    assert.deepEqual(calls, ['Journals:list|journals:apply', 'journals:v2|journals:apply', 'journals:aa|journals:z', 'journals:y|journals:k']);
  } finally {
    String.prototype.localeCompare = real;
  }
});

test('the bundled oclif sorts its commands with it', () => {
  const core = readFileSync(join(REPO_ROOT, 'dist', 'bundle', 'oclif-core.cjs'), 'utf8');
  assert.match(core, /\.sort\(\(a, b\) => __gazctlIdOrder\(a\.id, b\.id\)\)/);
  assert.doesNotMatch(core, /a\.id\.localeCompare\(b\.id\)/);
});
