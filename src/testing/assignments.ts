// Journal-level helpers over a running cluster: one-shot listings, pulses, and waiting until
// journals are assigned with consistent routes in etcd.

import { credentials, type ChannelCredentials } from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { authMetadata, claimsFor, makeAuthorizer } from '../lib/client/auth.js';
import { tlsCredentials } from '../lib/client/dial.js';
import { createSecureContext } from 'node:tls';
import { AppendRequest, AppendRequest_Suspend, JournalClient, Route, Status, type LabelSelector, type ListResponse, type ListResponse_Journal } from '../lib/protocol/gen/broker/protocol.js';
import { assignmentsPrefix, parseAssignmentKey, routeFromAssignments, type AssignmentKey } from '../lib/keyspace/keys.js';
import { routeEquals } from '../lib/protocol/route.js';
import { rangePrefix } from './etcd.js';
import { pollUntil } from './process.js';
import type { Cluster } from './cluster.js';

/** `host:port` for grpc-js from `http://host:port`. */
export function grpcTarget(endpoint: string): string {
  const u = new URL(endpoint);
  return u.host;
}

/**
 * How the harness's own calls reach brokers that serve TLS or verify tokens: the CA their
 * certificates chain to (for https:// endpoints), and the keys to sign with.
 */
export interface ClientSecurity {
  caFile?: string;
  authKeys?: string;
}

function channelCredentials(endpoint: string, sec: ClientSecurity | undefined): ChannelCredentials {
  if (!endpoint.startsWith('https:')) return credentials.createInsecure();
  return tlsCredentials(createSecureContext(sec?.caFile ? { ca: readFileSync(sec.caFile) } : {}), grpcTarget(endpoint));
}

/**
 * One non-watch `protocol.Journal/List` against `endpoint`. Resolves with the status of the first
 * response and every journal of the (possibly multi-message) snapshot.
 */
export function listJournals(
  endpoint: string,
  opts: { selector?: LabelSelector; timeoutMs?: number; security?: ClientSecurity } = {},
): Promise<{ status: Status; journals: ListResponse_Journal[] }> {
  const client = new JournalClient(grpcTarget(endpoint), channelCredentials(endpoint, opts.security));
  const md = authMetadata(makeAuthorizer({ authKeys: opts.security?.authKeys }), claimsFor.journalList(opts.selector));
  return new Promise((resolve, reject) => {
    const call = client.list(
      { selector: opts.selector ?? { include: undefined, exclude: undefined }, watch: false, watch_resume: undefined },
      md,
      { deadline: Date.now() + (opts.timeoutMs ?? 5000) },
    );
    let status: Status | undefined;
    const journals: ListResponse_Journal[] = [];
    call.on('data', (r: ListResponse) => {
      if (status === undefined) status = r.status;
      journals.push(...r.journals);
    });
    call.on('error', (err) => {
      client.close();
      reject(err);
    });
    call.on('end', () => {
      client.close();
      resolve({ status: status ?? Status.OK, journals });
    });
  });
}

/**
 * A zero-byte append to `journal` (what a Go primary does itself as its periodic "pulse"): it
 * runs a full round-trip through the replication pipeline, commits no data, never resumes a
 * suspended journal, and on success makes the primary advertise its current route in etcd.
 * Resolves with the response status; rejects on RPC errors.
 */
export function pulseJournal(endpoint: string, journal: string, timeoutMs = 5000): Promise<Status> {
  const client = new JournalClient(grpcTarget(endpoint), credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const call = client.append({ deadline: Date.now() + timeoutMs }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res.status);
    });
    call.write(
      AppendRequest.fromPartial({ journal, suspend: AppendRequest_Suspend.SUSPEND_NO_RESUME }),
    );
    call.write(AppendRequest.fromPartial({})); // commit intent
    call.end();
  });
}


/**
 * Whether a journal's assignments in etcd are "consistent": every assignment value (the route
 * last advertised by that replica, protobuf `Route`) equals the route derived from the keys
 * (members in key order, primary = the slot-0 assignment). A Go primary rewrites the values only
 * after an append round-trip through the full replication pipeline succeeded, so consistency
 * also means the pipeline works. Returns a description of the problem, or undefined when OK.
 */
export async function journalInconsistency(
  etcdEndpoint: string,
  etcdPrefix: string,
  journal: string,
): Promise<string | undefined> {
  const kvs = await rangePrefix(etcdEndpoint, assignmentsPrefix(etcdPrefix, journal));
  if (kvs.length === 0) return 'no assignments';
  const keys: AssignmentKey[] = [];
  for (const kv of kvs) {
    try {
      keys.push(parseAssignmentKey(etcdPrefix, kv.key));
    } catch {
      return `unparseable assignment key ${kv.key}`;
    }
  }
  const derived = routeFromAssignments(keys);
  const members = derived.members;
  for (const kv of kvs) {
    const r = kv.value.length ? Route.decode(kv.value) : undefined;
    if (r === undefined || !routeEquals(r, derived)) {
      const seen = r ? `${r.members.map((m) => m.suffix).join(',')} primary ${r.primary}` : 'empty';
      return `assignment ${kv.key} advertises [${seen}], keys say [${members.map((m) => m.suffix).join(',')}] primary ${derived.primary}`;
    }
  }
  return undefined;
}

/**
 * Poll until each named journal exists and has a route with a primary and at least
 * `spec.replication` members, as listed by every running broker, and its assignments in etcd
 * are consistent (see {@link journalInconsistency}; skip with `consistent: false`, e.g. for a
 * broker implementation that does not maintain assignment values). Resolves with the journals
 * as last listed by the first running broker.
 *
 * A journal that stays inconsistent for a second is pulsed ({@link pulseJournal}) about once a
 * second (disable with `pulse: false`). This matters after a broker restarts on the same port:
 * the Go primary's connection to that peer sits in gRPC reconnect back-off, its own pulse fails,
 * and it would not try again for a minute (its health-check interval); meanwhile one-shot
 * appends fail with Unavailable.
 */
export async function waitForJournalsAssigned(
  cluster: Cluster,
  names: string[],
  timeoutMs = 30_000,
  opts: { consistent?: boolean; pulse?: boolean } = {},
): Promise<Map<string, ListResponse_Journal>> {
  const problems: string[] = [];
  const inconsistentSince = new Map<string, number>();
  const lastPulse = new Map<string, number>();
  return pollUntil(
    `journals ${names.join(', ')} to be assigned`,
    async () => {
      problems.length = 0;
      let first: Map<string, ListResponse_Journal> | undefined;
      for (let i = 0; i < cluster.brokers.length; i++) {
        if (!cluster.isRunning(i)) continue;
        const b = cluster.brokers[i]!;
        const r = await listJournals(b.endpoint, { timeoutMs: 2000, security: cluster.clientSecurity });
        if (r.status !== Status.OK) {
          problems.push(`broker ${b.id}: List status ${Status[r.status]}`);
          continue;
        }
        const byName = new Map(r.journals.map((j) => [j.spec?.name ?? '', j]));
        first ??= byName;
        for (const name of names) {
          const j = byName.get(name);
          const want = j?.spec?.replication ?? 0;
          const members = j?.route?.members.length ?? 0;
          const primary = j?.route?.primary ?? -1;
          if (!j) problems.push(`broker ${b.id}: ${name} not listed`);
          else if (members < want || primary < 0 || primary >= members) {
            problems.push(`broker ${b.id}: ${name} has ${members}/${want} members, primary ${primary}`);
          }
        }
      }
      if (problems.length === 0 && (opts.consistent ?? true)) {
        for (const name of names) {
          const p = await journalInconsistency(cluster.etcd.endpoint, cluster.etcdPrefix, name);
          if (!p) {
            inconsistentSince.delete(name);
            continue;
          }
          problems.push(`${name}: ${p}`);
          const now = Date.now();
          if (!inconsistentSince.has(name)) inconsistentSince.set(name, now);
          if ((opts.pulse ?? true) && now - inconsistentSince.get(name)! >= 1000 && now - (lastPulse.get(name) ?? 0) >= 1000) {
            lastPulse.set(name, now);
            await pulseJournal(cluster.brokerAddress, name, 2000).catch(() => undefined);
          }
        }
      }
      return problems.length === 0 && first ? first : undefined;
    },
    { timeoutMs, intervalMs: 100, describe: () => problems.slice(0, 10).join('\n') },
  );
}
