// Verification of bearer tokens as our brokers and consumers do it (src/lib/client/verify.ts):
// tokens our signer makes pass; tampered, wrongly signed, `none`, expired and exp-less ones fail
// with upstream's reasons; capabilities and the AA== rollout key behave as upstream's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { Capability, signJwt, claimsFor } from '../../../../src/lib/client/auth.js';
import { AuthError, KeyVerifier, LEEWAY_SEC, parseVerifyKeys, verifyToken } from '../../../../src/lib/client/verify.js';

const KEY = Buffer.from('0123456789abcdef0123456789abcdef');
const OTHER = Buffer.from('fedcba9876543210fedcba9876543210');
const KEYS = `${OTHER.toString('base64')}, ${KEY.toString('base64')}`;
const NOW = 1_800_000_000;

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
/** A token with any header and payload, signed with HMAC `hash` (or given `sig`). */
function token(header: unknown, payload: unknown, key = KEY, hash = 'sha256', sig?: string): string {
  const signed = `${b64(header)}.${b64(payload)}`;
  return `${signed}.${sig ?? createHmac(hash, key).update(signed).digest('base64url')}`;
}
const claims = (extra: Record<string, unknown> = {}) => ({ cap: Capability.READ, exp: NOW + 60, iat: NOW, ...extra });

function refused(fn: () => unknown, re: RegExp): void {
  assert.throws(fn, (e: unknown) => e instanceof AuthError && re.test(e.message), String(re));
}

test('a token our signer makes verifies with any of the keys, with its claims', () => {
  const t = signJwt(KEY, claimsFor.journalRead('a/b;meta'), NOW);
  const c = verifyToken(t, [OTHER, KEY], NOW);
  assert.equal(c.cap, Capability.READ);
  assert.equal(c.exp, NOW + 3600);
  assert.deepEqual(c.sel.include?.labels, [{ name: 'name', value: 'a/b', prefix: false }]);
  assert.deepEqual(c.sel.exclude?.labels, []);
  // Go's JSON: "labels": null, labels without empty fields, prefix true.
  const g = token({ alg: 'HS256', typ: 'JWT' }, claims({ sel: { include: { labels: [{ name: 'name', value: 'x/', prefix: true }, { name: 'app' }] }, exclude: { labels: null } } }));
  assert.deepEqual(verifyToken(g, [KEY], NOW).sel, { include: { labels: [{ name: 'name', value: 'x/', prefix: true }, { name: 'app', value: '', prefix: false }] }, exclude: { labels: [] } });
});

test('HS384 is accepted; none, RS256 and a missing alg are not', () => {
  assert.equal(verifyToken(token({ alg: 'HS384' }, claims(), KEY, 'sha384'), [KEY], NOW).cap, Capability.READ);
  refused(() => verifyToken(token({ alg: 'none' }, claims(), KEY, 'sha256', ''), [KEY], NOW), /signing method none is invalid/);
  refused(() => verifyToken(`${b64({ alg: 'none' })}.${b64(claims())}.`, [KEY], NOW), /signing method none is invalid/);
  refused(() => verifyToken(token({ alg: 'RS256' }, claims()), [KEY], NOW), /signing method RS256 is invalid/);
  refused(() => verifyToken(token({ typ: 'JWT' }, claims()), [KEY], NOW), /signing method \(none\) is invalid/);
  // An HS384 header over an HS256 signature does not verify.
  refused(() => verifyToken(token({ alg: 'HS384' }, claims(), KEY, 'sha256'), [KEY], NOW), /signature is invalid/);
});

test('a tampered payload, a foreign key or a truncated signature fails', () => {
  const t = signJwt(KEY, { cap: Capability.READ, sel: { include: { labels: [] }, exclude: { labels: [] } }, ttlSec: 60 }, NOW);
  const [h, , s] = t.split('.');
  const forged = `${h}.${b64({ cap: Capability.ALL, exp: NOW + 60, iat: NOW })}.${s}`;
  refused(() => verifyToken(forged, [KEY], NOW), /signature is invalid/);
  refused(() => verifyToken(t, [OTHER], NOW), /signature is invalid/);
  refused(() => verifyToken(t.slice(0, -4), [KEY], NOW), /(signature is invalid|not base64url)/);
  refused(() => verifyToken(t.slice(0, -3), [KEY], NOW), /signature is invalid/);
  refused(() => verifyToken(t + 'A', [KEY], NOW), /(signature is invalid|not base64url)/);
});

test('malformed tokens are refused before their signature is looked at', () => {
  refused(() => verifyToken('a.b', [KEY], NOW), /invalid number of segments/);
  refused(() => verifyToken('a.b.c.d', [KEY], NOW), /invalid number of segments/);
  refused(() => verifyToken(`${b64({ alg: 'HS256' })}=.x.y`, [KEY], NOW), /header is not base64url/);
  refused(() => verifyToken(`${Buffer.from('nope').toString('base64url')}.x.y`, [KEY], NOW), /header is not JSON/);
  refused(() => verifyToken(`${b64([1])}.x.y`, [KEY], NOW), /header is not a JSON object/);
  const signed = `${b64({ alg: 'HS256' })}.${Buffer.from('[]').toString('base64url')}`;
  refused(() => verifyToken(`${signed}.${createHmac('sha256', KEY).update(signed).digest('base64url')}`, [KEY], NOW), /payload is not a JSON object/);
});

test('exp is required and has 5 s of leeway; iat may not be in the future; nbf is honoured', () => {
  refused(() => verifyToken(token({ alg: 'HS256' }, { cap: 8, iat: NOW }), [KEY], NOW), /exp claim is required/);
  refused(() => verifyToken(token({ alg: 'HS256' }, claims({ exp: 'soon' })), [KEY], NOW), /exp is not a number/);
  const t = token({ alg: 'HS256' }, claims({ exp: NOW }));
  assert.equal(verifyToken(t, [KEY], NOW + LEEWAY_SEC).exp, NOW);
  refused(() => verifyToken(t, [KEY], NOW + LEEWAY_SEC + 1), /token is expired/);
  assert.ok(verifyToken(token({ alg: 'HS256' }, claims({ iat: NOW + LEEWAY_SEC })), [KEY], NOW));
  refused(() => verifyToken(token({ alg: 'HS256' }, claims({ iat: NOW + LEEWAY_SEC + 1 })), [KEY], NOW), /used before issued/);
  refused(() => verifyToken(token({ alg: 'HS256' }, claims({ nbf: NOW + 60 })), [KEY], NOW), /not valid yet/);
});

test('claims of the wrong type are refused', () => {
  refused(() => verifyToken(token({ alg: 'HS256' }, claims({ cap: -1 })), [KEY], NOW), /cap is not a uint32/);
  refused(() => verifyToken(token({ alg: 'HS256' }, claims({ cap: 2 ** 32 })), [KEY], NOW), /cap is not a uint32/);
  refused(() => verifyToken(token({ alg: 'HS256' }, claims({ sel: 'name=x' })), [KEY], NOW), /sel is not an object/);
  refused(() => verifyToken(token({ alg: 'HS256' }, claims({ sel: { include: { labels: [{ name: 1 }] } } })), [KEY], NOW), /name is not a string/);
});

test('KeyVerifier: every key verifies, capabilities must all be held, Bearer is required', () => {
  const v = new KeyVerifier(KEYS);
  const read = `Bearer ${signJwt(KEY, claimsFor.journalRead('j'))}`;
  assert.equal(v.verify(read, Capability.READ).cap, Capability.READ);
  assert.throws(() => v.verify(read, Capability.APPEND), (e: unknown) => e instanceof AuthError && e.message === 'authorization is missing required APPEND capability');
  assert.throws(() => v.verify(read, Capability.READ | (1 << 16)), /missing required capability \(have 1000, but require 10000000000001000\)/);
  assert.equal(v.verify(`Bearer ${signJwt(OTHER, { cap: Capability.ALL, sel: { include: { labels: [] }, exclude: { labels: [] } }, ttlSec: 60 })}`, Capability.REPLICATE).cap, Capability.ALL);
  assert.throws(() => v.verify(undefined, Capability.LIST), /^Error: missing or empty Authorization token$|missing or empty Authorization token/);
  assert.throws(() => v.verify('', Capability.LIST), /missing or empty Authorization token/);
  assert.throws(() => v.verify(read.replace('Bearer', 'Basic'), Capability.READ), /expected 'Bearer'/);
  assert.throws(() => v.verify('Bearer nonsense', Capability.READ), /^Error: verifying Authorization: token is malformed/);
});

test('AA== lets calls without a token through, but still checks tokens that are sent', () => {
  const v = new KeyVerifier(`${KEY.toString('base64')} AA==`);
  assert.equal(v.allowMissing, true);
  const c = v.verify(undefined, Capability.APPLY, NOW);
  assert.equal(c.cap, Capability.APPLY);
  assert.equal(c.exp, NOW + 3600);
  assert.deepEqual(c.sel, { include: { labels: [] }, exclude: { labels: [] } });
  assert.throws(() => v.verify(`Bearer ${signJwt(OTHER, claimsFor.journalApply())}`, Capability.APPLY), /signature is invalid/);
  // Without AA==, a missing token is refused.
  assert.throws(() => new KeyVerifier(KEY.toString('base64')).verify(undefined, Capability.LIST), /missing or empty/);
});

test('parseVerifyKeys: comma or space separated, AA== alone is not enough, bad base64 named', () => {
  const p = parseVerifyKeys(` ${KEY.toString('base64')},AA==\n${OTHER.toString('base64')} `);
  assert.deepEqual(p.keys, [KEY, OTHER]);
  assert.equal(p.allowMissing, true);
  assert.throws(() => parseVerifyKeys('AA=='), /at least one key must be provided/);
  assert.throws(() => parseVerifyKeys(''), /at least one key must be provided/);
  assert.throws(() => parseVerifyKeys(`${KEY.toString('base64')} not*base64`), /key at index 1/);
});
