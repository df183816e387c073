// Authorization metadata for Gazette RPCs: either a pre-shared
// bearer token forwarded verbatim, or a short-lived HS256 JWT minted per call from shared keys.
import { createHmac } from 'node:crypto';
import { Metadata } from '@grpc/grpc-js';
import type { Label, LabelSelector } from '../protocol/gen/broker/protocol.js';
import { ValidationError } from '../protocol/errors.js';

/** Capability bits carried in the `cap` claim. */
export const Capability = {
  LIST: 1 << 1,
  APPLY: 1 << 2,
  READ: 1 << 3,
  APPEND: 1 << 4,
  REPLICATE: 1 << 5,
  ALL: 0xffffffff,
} as const;

/** What one RPC asks for: its capability bits, the claims selector, and the token lifetime. */
export interface Claims {
  cap: number;
  sel: LabelSelector;
  /** Token lifetime in seconds. */
  ttlSec: number;
}

/** The special key that only enables "allow missing auth" on servers; never used to sign. */
export const ALLOW_MISSING_KEY = 'AA==';

/** Splits and decodes an auth-keys string (standard base64, separated by whitespace/commas). */
export function parseAuthKeys(keys: string): Buffer[] {
  const out: Buffer[] = [];
  for (const part of keys.split(/[\s,]+/)) {
    if (part === '') continue;
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(part) || part.length % 4 !== 0) {
      throw new ValidationError(`parsing authorization keys: ${JSON.stringify(part)} is not valid base64`);
    }
    if (part === ALLOW_MISSING_KEY) continue;
    out.push(Buffer.from(part, 'base64'));
  }
  if (out.length === 0) throw new ValidationError('parsing authorization keys: no signing key given');
  return out;
}

function b64url(b: Buffer | string): string {
  return (typeof b === 'string' ? Buffer.from(b, 'utf8') : b).toString('base64url');
}

function labelJson(l: Label): Record<string, unknown> {
  // Go's JSON for Label omits empty fields.
  const o: Record<string, unknown> = {};
  if (l.name) o.name = l.name;
  if (l.value) o.value = l.value;
  if (l.prefix) o.prefix = true;
  return o;
}

/** The claims selector as Go's encoding/json renders a LabelSelector. */
export function selectorClaimJson(sel: LabelSelector): unknown {
  const set = (labels: Label[] | undefined) => ({ labels: labels && labels.length ? labels.map(labelJson) : null });
  return { include: set(sel.include?.labels), exclude: set(sel.exclude?.labels) };
}

/** Signs an HS256 JWT with `key` for `claims`, issued at `nowSec`. */
export function signJwt(key: Buffer, claims: Claims, nowSec = Math.floor(Date.now() / 1000)): string {
  const header = b64url('{"alg":"HS256","typ":"JWT"}');
  const payload = b64url(
    JSON.stringify({
      cap: claims.cap >>> 0,
      sel: selectorClaimJson(claims.sel),
      exp: nowSec + claims.ttlSec,
      iat: nowSec,
    }),
  );
  const sig = createHmac('sha256', key).update(`${header}.${payload}`).digest();
  return `${header}.${payload}.${b64url(sig)}`;
}

/** Produces the `authorization` header value for a call, or undefined when auth is off. */
export type Authorizer = (claims: Claims) => string | undefined;

/** Call metadata carrying `authorize`'s authorization for `claims` (empty when auth is off). */
export function authMetadata(authorize: Authorizer, claims: Claims): Metadata {
  const md = new Metadata();
  const auth = authorize(claims);
  if (auth !== undefined) md.set('authorization', auth);
  return md;
}

/** Builds an Authorizer from a static token and/or auth keys (keys win, as in gazctl). */
export function makeAuthorizer(opts: { authToken?: string; authKeys?: string }): Authorizer {
  if (opts.authKeys && opts.authKeys.trim() !== '') {
    const key = parseAuthKeys(opts.authKeys)[0]!;
    return (claims) => `Bearer ${signJwt(key, claims)}`;
  }
  if (opts.authToken) {
    const value = `Bearer ${opts.authToken}`;
    return () => value;
  }
  return () => undefined;
}

function labels(list: Label[]): LabelSelector {
  const sorted = [...list].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.value < b.value ? -1 : a.value > b.value ? 1 : 0));
  return { include: { labels: sorted }, exclude: { labels: [] } };
}

const EMPTY: LabelSelector = { include: { labels: [] }, exclude: { labels: [] } };
const HOUR = 3600;
const MINUTE = 60;

/** Claims of each RPC, per the wire contract's table. */
export const claimsFor = {
  journalList: (sel: LabelSelector | undefined): Claims => ({ cap: Capability.LIST, sel: sel ?? EMPTY, ttlSec: HOUR }),
  journalApply: (): Claims => ({ cap: Capability.APPLY, sel: EMPTY, ttlSec: MINUTE }),
  journalRead: (journal: string): Claims => ({
    cap: Capability.READ,
    sel: labels([{ name: 'name', value: journal.split(';')[0]!, prefix: false }]),
    ttlSec: HOUR,
  }),
  journalAppend: (journal: string): Claims => ({
    cap: Capability.APPEND,
    sel: labels([{ name: 'name', value: journal, prefix: false }]),
    ttlSec: HOUR,
  }),
  journalFragments: (journal: string): Claims => ({
    cap: Capability.READ,
    sel: labels([{ name: 'name', value: journal, prefix: false }]),
    ttlSec: HOUR,
  }),
  /** A broker's Replicate stream of a journal (brokers sign these for each other). */
  journalReplicate: (journal: string): Claims => ({
    cap: Capability.REPLICATE,
    sel: labels([{ name: 'name', value: journal, prefix: false }]),
    ttlSec: HOUR,
  }),
  journalStoreHealth: (): Claims => ({ cap: Capability.READ, sel: EMPTY, ttlSec: HOUR }),
  shardStat: (shard: string): Claims => ({ cap: Capability.READ, sel: labels([{ name: 'id', value: shard, prefix: false }]), ttlSec: MINUTE }),
  shardList: (sel: LabelSelector | undefined): Claims => ({ cap: Capability.LIST, sel: sel ?? EMPTY, ttlSec: MINUTE }),
  shardApply: (): Claims => ({ cap: Capability.APPLY, sel: EMPTY, ttlSec: MINUTE }),
  shardGetHints: (shard: string): Claims => ({ cap: Capability.READ, sel: labels([{ name: 'id', value: shard, prefix: false }]), ttlSec: MINUTE }),
  shardUnassign: (shards: string[]): Claims => ({
    cap: Capability.APPLY,
    sel: labels(shards.map((s) => ({ name: 'id', value: s, prefix: false }))),
    ttlSec: MINUTE,
  }),
};
