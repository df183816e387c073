// The `protocol.Journal` gRPC service of the broker: List and Apply over the etcd view, and
// Read, Append, Replicate, ListFragments and FragmentStoreHealth routed to (or proxied to) the
// broker that serves the journal.
//
// A server stream ends with an error status through emit('error', …): grpc-js's destroy() would
// leave the client waiting without one.

import { status as GrpcStatus, type sendUnaryData, type ServerReadableStream, type ServerWritableStream } from '@grpc/grpc-js';
import {
  AppendRequest_Suspend,
  AppendResponse,
  FragmentsResponse,
  JournalSpec,
  JournalSpec_Suspend_Level,
  ListResponse,
  ReadResponse,
  Status,
  type AppendRequest,
  type ApplyRequest,
  type ApplyResponse,
  type FragmentStoreHealthRequest,
  type FragmentStoreHealthResponse,
  type FragmentsRequest,
  type JournalServer,
  type ListRequest,
  type ListResponse_Journal,
  type ReadRequest,
} from '../../lib/protocol/gen/broker/protocol.js';
import { itemKey } from '../../lib/keyspace/keys.js';
import { durationToNanos } from '../../lib/protocol/duration.js';
import { rewritePrefixLabels, matchesSelector, journalMatchLabels, validateLabelSelector } from '../../lib/protocol/selector.js';
import { validateJournalApplyRequest } from '../../lib/protocol/validate/index.js';
import { RpcError, serveAppend, updateSuspend } from './append.js';
import { journalReadable, type Broker } from './broker.js';
import { proxyAppend, proxyFragments, proxyRead } from './proxy.js';
import { serveRead } from './read.js';
import { serveReplicate } from './replicate.js';
import { rpcError, toServiceError } from './rpc-errors.js';
import { Capability } from '../../lib/client/auth.js';
import { atExpiry, expiredError, notAuthorized, verifyCall, type CallClaims } from '../security.js';
import type { Metadata, ServiceError } from '@grpc/grpc-js';

const { LIST, APPLY, READ, APPEND, REPLICATE } = Capability;

/** The claims of a call, or the UNAUTHENTICATED error to end it with. */
function check(b: Broker, md: Pick<Metadata, 'get'> | undefined, require: number): { claims: CallClaims; err?: undefined } | { err: ServiceError; claims?: undefined } {
  try {
    return { claims: verifyCall(b.security?.verifier, md, require) };
  } catch (e) {
    return { err: e as ServiceError };
  }
}

/** Journals per List response message, as upstream. */
const LIST_PAGE = 25;
const DEFAULT_FRAGMENTS_PAGE = 1000;

export function journalService(b: Broker): JournalServer {
  const unrouted = () => b.resolver.header();

  const snapshot = (sel: ListRequest['selector'], claims: CallClaims) => {
    const out: ListResponse_Journal[] = [];
    let maxRev = 0n;
    for (const j of b.view.journals().values()) {
      const labels = journalMatchLabels(j.spec);
      // Journals outside the caller's claims are left out as if they did not exist.
      if (!matchesSelector(sel, labels) || (claims.sel && !matchesSelector(claims.sel, labels))) continue;
      out.push({ spec: j.spec, mod_revision: j.kv.modRevision, create_revision: j.kv.createRevision, route: j.route });
      if (j.kv.modRevision > maxRev) maxRev = j.kv.modRevision;
      for (const a of j.assignments) if (a.kv.modRevision > maxRev) maxRev = a.kv.modRevision;
    }
    return { journals: out, key: `${out.length}:${maxRev}` };
  };

  return {
    async list(call: ServerWritableStream<ListRequest, ListResponse>) {
      const auth = check(b, call.metadata, LIST);
      if (auth.err) return call.emit('error', auth.err);
      const req = call.request;
      let sel;
      try {
        validateLabelSelector(req.selector ?? { include: undefined, exclude: undefined });
        sel = rewritePrefixLabels(req.selector ?? { include: undefined, exclude: undefined });
      } catch (e) {
        return call.emit('error', rpcError(GrpcStatus.INVALID_ARGUMENT, `list: ${(e as Error).message}`));
      }
      const ac = new AbortController();
      call.on('cancelled', () => ac.abort());
      call.on('close', () => ac.abort());
      // A watch ends when its token expires.
      const stopTimer = atExpiry(auth.claims, () => {
        if (ac.signal.aborted) return;
        ac.abort();
        call.emit('error', expiredError());
      });
      ac.signal.addEventListener('abort', stopTimer, { once: true });
      try {
        if (req.watch_resume?.etcd) await b.view.waitFor(req.watch_resume.etcd.revision + 1n, ac.signal);
        let last = '';
        for (;;) {
          const s = snapshot(sel, auth.claims);
          if (s.key !== last || !req.watch) {
            last = s.key;
            const pages = [];
            for (let i = 0; i < s.journals.length; i += LIST_PAGE) pages.push(s.journals.slice(i, i + LIST_PAGE));
            call.write(ListResponse.fromPartial({ status: Status.OK, header: unrouted(), journals: pages[0] ?? [] }));
            for (const p of pages.slice(1)) call.write(ListResponse.fromPartial({ journals: p }));
            if (!req.watch) break;
            call.write(ListResponse.fromPartial({}));
          }
          await new Promise<void>((resolve) => {
            const off = b.view.onChange(() => {
              off();
              resolve();
            });
            ac.signal.addEventListener('abort', () => {
              off();
              resolve();
            }, { once: true });
          });
          if (ac.signal.aborted) return;
        }
        call.end();
      } catch (e) {
        if (!ac.signal.aborted) call.emit('error', toServiceError(e));
      }
    },

    async apply(call, reply: sendUnaryData<ApplyResponse>) {
      let cb = reply;
      const auth = check(b, call.metadata, APPLY);
      if (auth.err) return cb(auth.err);
      const req: ApplyRequest = call.request;
      try {
        validateJournalApplyRequest(req);
      } catch (e) {
        return cb(rpcError(GrpcStatus.INVALID_ARGUMENT, `apply: ${(e as Error).message}`));
      }
      // An upsert is authorized by the journal's labels (and name), a delete by its name alone.
      const claimSel = auth.claims.sel;
      if (claimSel) {
        for (const c of req.changes) {
          const name = c.upsert ? c.upsert.name : c.delete;
          const labels = c.upsert ? journalMatchLabels(c.upsert) : { labels: [{ name: 'name', value: name, prefix: false }] };
          if (!matchesSelector(claimSel, labels)) return cb(notAuthorized(name));
        }
      }
      const compare = [];
      const success = [];
      for (const c of req.changes) {
        const name = c.upsert ? c.upsert.name : c.delete;
        const key = itemKey(b.view.root, name);
        if (c.expect_mod_revision !== -1n) compare.push({ key, target: 'modRevision' as const, result: '=' as const, value: c.expect_mod_revision });
        success.push(c.upsert ? { put: key, value: Buffer.from(JournalSpec.encode(c.upsert).finish()) } : { delete: key });
      }
      // Answer as upstream does ("context deadline exceeded") just before the caller's deadline
      // when etcd is slow, rather than leaving it to grpc-js's own deadline message.
      let answered = false;
      const once: sendUnaryData<ApplyResponse> = (err, res) => {
        if (answered) return;
        answered = true;
        clearTimeout(timer);
        reply(err, res);
      };
      const deadline = call.getDeadline();
      const ms = deadline instanceof Date ? deadline.getTime() - Date.now() : typeof deadline === 'number' && Number.isFinite(deadline) ? deadline - Date.now() : Infinity;
      const timer = Number.isFinite(ms) ? setTimeout(() => once(rpcError(GrpcStatus.DEADLINE_EXCEEDED, 'context deadline exceeded')), Math.max(0, ms - 50)) : undefined;
      cb = once;
      try {
        const r = await b.ks.txn({ compare, success });
        if (!r.succeeded) return cb(null, { status: Status.ETCD_TRANSACTION_FAILED, header: { ...unrouted(), etcd: b.view.etcdHeader(r.revision) } });
        await b.view.waitFor(r.revision);
        cb(null, { status: Status.OK, header: { ...unrouted(), etcd: b.view.etcdHeader(r.revision) } });
      } catch (e) {
        const msg = (e as Error).message;
        if (/too many operations in txn request/i.test(msg)) {
          return cb(
            rpcError(
              GrpcStatus.INVALID_ARGUMENT,
              `apply: ${req.changes.length} changes exceed etcd's limit of operations per transaction (--max-txn-ops, 128 by default); apply them in smaller batches (gazctl --max-txn-size)`,
            ),
          );
        }
        cb(rpcError(GrpcStatus.UNAVAILABLE, `apply: ${msg}`));
      }
    },

    async read(call: ServerWritableStream<ReadRequest, ReadResponse>) {
      const auth = check(b, call.metadata, READ);
      if (auth.err) return call.emit('error', auth.err);
      const req = call.request;
      // A (blocking) read ends when its token expires; serving stops as the call closes.
      let expired = false;
      const stopTimer = atExpiry(auth.claims, () => {
        expired = true;
        call.emit('error', expiredError());
      });
      call.on('close', stopTimer);
      try {
        const res = await b.resolver.resolve({
          journal: req.journal,
          claims: auth.claims.sel,
          requirePrimary: false,
          mayProxy: !req.do_not_proxy,
          header: req.header,
          minEtcdRevision: req.min_etcd_revision,
        });
        if (res.kind === 'status') {
          call.write(ReadResponse.fromPartial({ status: res.status, header: res.header }));
          return call.end();
        }
        if (res.kind === 'proxy') return await proxyRead(b.peers, [res, ...(res.fallbacks ?? [])], call);
        if (!journalReadable(res.spec.flags)) {
          call.write(ReadResponse.fromPartial({ status: Status.NOT_ALLOWED, header: res.header }));
          return call.end();
        }
        await serveRead(b, call, b.replicas.ensure(res.spec), res.header);
      } catch (e) {
        if (!expired) call.emit('error', toServiceError(e));
      } finally {
        stopTimer();
      }
    },

    async append(call: ServerReadableStream<AppendRequest, AppendResponse>, cb: sendUnaryData<AppendResponse>) {
      const auth = check(b, call.metadata, APPEND);
      if (auth.err) return cb(auth.err);
      const it = call[Symbol.asyncIterator]() as AsyncIterator<AppendRequest>;
      try {
        const n = await it.next();
        if (n.done) return cb(rpcError(GrpcStatus.INVALID_ARGUMENT, 'append: no request'));
        const first = n.value;
        if (first.journal === '') return cb(rpcError(GrpcStatus.INVALID_ARGUMENT, 'append: the first message must name the journal'));
        if (first.content.length > 0) return cb(rpcError(GrpcStatus.INVALID_ARGUMENT, 'append: the first message may not carry content'));
        // Like the upstream release we follow (v0.103.0), which has no SUSPEND_KEEP: any other
        // mode is refused before anything happens, and clients detect that by the text.
        if (first.suspend < AppendRequest_Suspend.SUSPEND_RESUME || first.suspend > AppendRequest_Suspend.SUSPEND_NOW) {
          return cb(rpcError(GrpcStatus.INVALID_ARGUMENT, `Suspend: invalid Suspend variant (${first.suspend})`));
        }
        const res = await b.resolver.resolve({
          journal: first.journal,
          claims: auth.claims.sel,
          requirePrimary: true,
          mayProxy: !first.do_not_proxy,
          header: first.header,
          minEtcdRevision: first.min_etcd_revision,
        });
        if (res.kind === 'status' && res.status === Status.SUSPENDED && first.suspend === AppendRequest_Suspend.SUSPEND_RESUME) {
          // Lift a full suspension; the journal is assigned again, and the client's retry of
          // the status below finds its new primary.
          const entry = b.view.journals().get(first.journal.split(';')[0]!);
          if (entry) await updateSuspend(b, { entry, spec: entry.spec }, { level: JournalSpec_Suspend_Level.NONE, offset: entry.spec.suspend?.offset ?? 0n });
          return cb(null, AppendResponse.fromPartial({ status: Status.NO_JOURNAL_PRIMARY_BROKER, header: res.header }));
        }
        if (res.kind === 'status') return cb(null, AppendResponse.fromPartial({ status: res.status, header: res.header }));
        if (res.kind === 'proxy') return cb(null, await proxyAppend(b.peers, res.endpoint, res.header, first, it, call));
        cb(null, await serveAppend(b, res, first, it));
      } catch (e) {
        cb(toServiceError(e));
      }
    },

    async replicate(call) {
      const auth = check(b, call.metadata, REPLICATE);
      if (auth.err) return call.emit('error', auth.err);
      try {
        await serveReplicate(b, call, auth.claims.sel);
      } catch (e) {
        call.emit('error', toServiceError(e));
      }
    },

    async listFragments(call, cb: sendUnaryData<FragmentsResponse>) {
      const auth = check(b, call.metadata, READ);
      if (auth.err) return cb(auth.err);
      const req: FragmentsRequest = call.request;
      try {
        const res = await b.resolver.resolve({ journal: req.journal, claims: auth.claims.sel, requirePrimary: false, mayProxy: !req.do_not_proxy, header: req.header });
        if (res.kind === 'status') return cb(null, FragmentsResponse.fromPartial({ status: res.status, header: res.header }));
        if (res.kind === 'proxy') return cb(null, await proxyFragments(b.peers, [res, ...(res.fallbacks ?? [])], req));
        if (res.spec.suspend?.level === JournalSpec_Suspend_Level.FULL) return cb(null, FragmentsResponse.fromPartial({ status: Status.SUSPENDED, header: res.header }));
        if (!journalReadable(res.spec.flags)) return cb(null, FragmentsResponse.fromPartial({ status: Status.NOT_ALLOWED, header: res.header }));
        const replica = b.replicas.ensure(res.spec);
        await replica.loaded;
        const page = await replica.index.list({
          pageToken: req.next_page_token,
          pageLimit: req.page_limit > 0 ? req.page_limit : DEFAULT_FRAGMENTS_PAGE,
          beginModTime: req.begin_mod_time,
          endModTime: req.end_mod_time,
          ...(req.signatureTTL ? { signatureTtlMs: Number(durationToNanos(req.signatureTTL) / 1_000_000n) } : {}),
        });
        const fragments = page.fragments.map((f) => ({ spec: f.spec, signed_url: f.signedUrl }));
        cb(null, { status: Status.OK, header: res.header, fragments, next_page_token: page.nextPageToken });
      } catch (e) {
        cb(toServiceError(e));
      }
    },

    async fragmentStoreHealth(call, cb: sendUnaryData<FragmentStoreHealthResponse>) {
      const auth = check(b, call.metadata, READ);
      if (auth.err) return cb(auth.err);
      const req: FragmentStoreHealthRequest = call.request;
      const header = unrouted();
      try {
        const store = b.openStore(req.fragment_store);
        await store.health(req.check_delete ? { deleteUnder: req.check_delete_prefix } : {});
        cb(null, { status: Status.OK, header, store_health_error: '' });
      } catch (e) {
        cb(null, { status: Status.FRAGMENT_STORE_UNHEALTHY, header, store_health_error: (e as Error).message });
      }
    },
  };
}
