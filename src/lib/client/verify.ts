// The server's side of Gazette authorization: checking the bearer token of an incoming call
// against pre-shared keys, as brokers and consumers started with `--*.auth-keys` do.
//
// A token is a JWT signed with HMAC (HS256 or HS384) by any of the keys. Its claims are `cap`
// (capability bits), `sel` (a label selector, in Go's JSON for LabelSelector), `exp` (required),
// `iat` (not in the future), optionally `nbf`; times are checked with 5 seconds of leeway either
// way. A call is allowed when the token holds every capability bit the RPC needs; its selector
// then limits which journals or shards the call may see or change. The key `AA==` (one zero
// byte) signs nothing: it lets calls without an authorization header through, granting the
// capability they need for an hour, for rolling authorization out over a running cluster.
//
// Verification is Node's HMAC and `timingSafeEqual`, with the token's shape checked strictly
// before any of it is trusted: three unpadded base64url parts, a JSON object header whose `alg`
// is HS256 or HS384 (never `none`), a JSON object payload.

import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Label, LabelSelector } from '../protocol/gen/broker/protocol.js';
import { ValidationError } from '../protocol/errors.js';
import { ALLOW_MISSING_KEY, Capability } from './auth.js';

/** Clock leeway for exp, nbf and iat, in seconds. */
export const LEEWAY_SEC = 5;

export { ALLOW_MISSING_KEY };

/** Claims of a verified token. */
export interface VerifiedClaims {
  cap: number;
  sel: LabelSelector;
  /** Expiry, in seconds since the epoch. */
  exp: number;
}

/** A refused authorization; `message` is what the caller is told (status UNAUTHENTICATED). */
export class AuthError extends Error {}

const HASH: Record<string, string> = { HS256: 'sha256', HS384: 'sha384' };

/** Parses an auth-keys string for verifying: every key, and whether `AA==` was among them. */
export function parseVerifyKeys(text: string): { keys: Buffer[]; allowMissing: boolean } {
  const keys: Buffer[] = [];
  let allowMissing = false;
  const parts = text.split(/[\s,]+/).filter((p) => p !== '');
  parts.forEach((part, i) => {
    if (part === ALLOW_MISSING_KEY) {
      allowMissing = true;
      return;
    }
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(part) || part.length % 4 !== 0) {
      throw new ValidationError(`failed to decode key at index ${i}: ${JSON.stringify(part)} is not standard base64`);
    }
    keys.push(Buffer.from(part, 'base64'));
  });
  if (keys.length === 0) throw new ValidationError('at least one key must be provided (AA== alone only allows missing tokens)');
  return { keys, allowMissing };
}

function b64urlPart(s: string, what: string): Buffer {
  if (s === '' || !/^[A-Za-z0-9_-]+$/.test(s)) throw new AuthError(`token is malformed: ${what} is not base64url`);
  const b = Buffer.from(s, 'base64url');
  // Node decodes leniently (trailing bits); only the canonical text of these bytes is accepted.
  if (b.toString('base64url') !== s) throw new AuthError(`token is malformed: ${what} is not base64url`);
  return b;
}

function jsonObject(b: Buffer, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(b.toString('utf8'));
  } catch {
    throw new AuthError(`token is malformed: ${what} is not JSON`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new AuthError(`token is malformed: ${what} is not a JSON object`);
  return v as Record<string, unknown>;
}

function numericDate(v: unknown, name: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new AuthError(`token has invalid claims: ${name} is not a number`);
  return v;
}

function labelsOf(v: unknown, where: string): Label[] {
  if (v === undefined || v === null) return [];
  if (typeof v !== 'object' || Array.isArray(v)) throw new AuthError(`token has invalid claims: sel.${where} is not an object`);
  const labels = (v as { labels?: unknown }).labels;
  if (labels === undefined || labels === null) return [];
  if (!Array.isArray(labels)) throw new AuthError(`token has invalid claims: sel.${where}.labels is not a list`);
  return labels.map((l: unknown) => {
    if (typeof l !== 'object' || l === null) throw new AuthError(`token has invalid claims: sel.${where}.labels holds a non-object`);
    const o = l as { name?: unknown; value?: unknown; prefix?: unknown };
    const str = (x: unknown, f: string) => {
      if (x === undefined || x === null) return '';
      if (typeof x !== 'string') throw new AuthError(`token has invalid claims: a label's ${f} is not a string`);
      return x;
    };
    if (o.prefix !== undefined && o.prefix !== null && typeof o.prefix !== 'boolean') throw new AuthError("token has invalid claims: a label's prefix is not a boolean");
    return { name: str(o.name, 'name'), value: str(o.value, 'value'), prefix: o.prefix === true };
  });
}

/** The selector of the `sel` claim (absent: matches everything). */
export function selectorFromClaim(v: unknown): LabelSelector {
  if (v === undefined || v === null) return { include: { labels: [] }, exclude: { labels: [] } };
  if (typeof v !== 'object' || Array.isArray(v)) throw new AuthError('token has invalid claims: sel is not an object');
  const o = v as { include?: unknown; exclude?: unknown };
  return { include: { labels: labelsOf(o.include, 'include') }, exclude: { labels: labelsOf(o.exclude, 'exclude') } };
}

const CAP_NAMES: [number, string][] = [
  [Capability.LIST, 'LIST'],
  [Capability.APPLY, 'APPLY'],
  [Capability.READ, 'READ'],
  [Capability.APPEND, 'APPEND'],
  [Capability.REPLICATE, 'REPLICATE'],
];

/** Refuses `have` unless it holds every bit of `require`, naming the first one missing. */
export function checkCapability(have: number, require: number): void {
  if (((have & require) >>> 0) === require >>> 0) return;
  for (const [bit, name] of CAP_NAMES) {
    if (require & bit && !(have & bit)) throw new AuthError(`authorization is missing required ${name} capability`);
  }
  throw new AuthError(`authorization is missing required capability (have ${(have >>> 0).toString(2)}, but require ${(require >>> 0).toString(2)})`);
}

/**
 * Verifies `token` (the JWT, without "Bearer ") with any of `keys` at `nowSec`, and returns its
 * claims; throws AuthError saying why not.
 */
export function verifyToken(token: string, keys: readonly Buffer[], nowSec = Date.now() / 1000): VerifiedClaims {
  const parts = token.split('.');
  if (parts.length !== 3) throw new AuthError('token is malformed: token contains an invalid number of segments');
  const [h, p, s] = parts as [string, string, string];
  const header = jsonObject(b64urlPart(h, 'header'), 'header');
  const alg = header.alg;
  if (typeof alg !== 'string' || HASH[alg] === undefined) {
    throw new AuthError(`token is unverifiable: signing method ${typeof alg === 'string' ? alg : '(none)'} is invalid`);
  }
  const sig = b64urlPart(s, 'signature');
  const signed = `${h}.${p}`;
  let ok = false;
  for (const key of keys) {
    const mac = createHmac(HASH[alg]!, key).update(signed).digest();
    // Every key is tried, so the time taken does not tell which one (if any) matched.
    if (mac.length === sig.length && timingSafeEqual(mac, sig)) ok = true;
  }
  if (!ok) throw new AuthError('token signature is invalid: signature is invalid');
  const claims = jsonObject(b64urlPart(p, 'payload'), 'payload');

  const exp = numericDate(claims.exp, 'exp');
  if (exp === undefined) throw new AuthError('token has invalid claims: token is missing required claim: exp claim is required');
  if (nowSec > exp + LEEWAY_SEC) throw new AuthError('token has invalid claims: token is expired');
  const nbf = numericDate(claims.nbf, 'nbf');
  if (nbf !== undefined && nowSec + LEEWAY_SEC < nbf) throw new AuthError('token has invalid claims: token is not valid yet');
  const iat = numericDate(claims.iat, 'iat');
  if (iat !== undefined && nowSec + LEEWAY_SEC < iat) throw new AuthError('token has invalid claims: token used before issued');

  const cap = claims.cap ?? 0;
  if (typeof cap !== 'number' || !Number.isInteger(cap) || cap < 0 || cap > 0xffffffff) throw new AuthError('token has invalid claims: cap is not a uint32');
  return { cap, sel: selectorFromClaim(claims.sel), exp };
}

/** Verifies the authorization of incoming calls with a set of keys. */
export class KeyVerifier {
  readonly keys: Buffer[];
  readonly allowMissing: boolean;

  constructor(authKeys: string) {
    const { keys, allowMissing } = parseVerifyKeys(authKeys);
    this.keys = keys;
    this.allowMissing = allowMissing;
  }

  /**
   * The claims of a call whose `authorization` metadata is `header` (undefined: none) and which
   * needs the `require` capability bits; throws AuthError when it may not proceed.
   */
  verify(header: string | undefined, require: number, nowSec = Date.now() / 1000): VerifiedClaims {
    if (header === undefined || header === '') {
      if (this.allowMissing) return { cap: require, sel: { include: { labels: [] }, exclude: { labels: [] } }, exp: nowSec + 3600 };
      throw new AuthError('missing or empty Authorization token');
    }
    if (!header.startsWith('Bearer ')) throw new AuthError("invalid or unsupported Authorization header (expected 'Bearer')");
    let claims: VerifiedClaims;
    try {
      claims = verifyToken(header.slice('Bearer '.length), this.keys, nowSec);
    } catch (e) {
      if (e instanceof AuthError) throw new AuthError(`verifying Authorization: ${e.message}`);
      throw e;
    }
    checkCapability(claims.cap, require);
    return claims;
  }
}
