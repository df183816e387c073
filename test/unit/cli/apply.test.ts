// Unit tests of src/cli/apply.ts: the --dry-run plan and the operator's line for each kind of
// apply failure (the library's ApplyError), plus the journals apply flow on a fake client.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { checkMaxTxnSize, explainApplyFailure, ranges, renderPlan, transactionCount } from '../../../src/cli/apply.js';
import { exitCodeFor, UsageError } from '../../../src/cli/exit.js';
import { applyJournalChanges } from '../../../src/cli/journal-specs.js';
import { ApplyError, applyInBatches, planJournalChanges, type ApplyOptions } from '../../../src/lib/client/index.js';
import { BrokerStatusError, GazctlError, TransportError, ValidationError } from '../../../src/lib/protocol/errors.js';
import {
  Status,
  type ApplyRequest_Change,
  type ApplyResponse,
  type JournalSpec,
  type ListResponse,
  type ListResponse_Journal,
} from '../../../src/lib/protocol/gen/broker/protocol.js';

function spec(name: string, rate = 0n): JournalSpec {
  return { name, replication: 1, labels: { labels: [] }, fragment: undefined, flags: 0, max_append_rate: rate, suspend: undefined };
}
const cur = (name: string, rev: bigint): ListResponse_Journal => ({ spec: spec(name), mod_revision: rev, route: undefined, create_revision: rev });
const up = (name: string, rev: bigint, rate = 0n): ApplyRequest_Change => ({ expect_mod_revision: rev, upsert: spec(name, rate), delete: '' });
const del = (name: string, rev: bigint): ApplyRequest_Change => ({ expect_mod_revision: rev, upsert: undefined, delete: name });

const SERVICE = { what: 'applying journal specs', statusError: (s: number, c: string) => new BrokerStatusError(s, c) };

/** The ApplyError a run of `n` changes in batches of `size` gets when batch `failAt` answers `answer`. */
async function failure(n: number, size: number, failAt: number, answer: () => { status: number }): Promise<ApplyError> {
  let i = 0;
  try {
    await applyInBatches(Array.from({ length: n }, (_, k) => k), async () => (i++ === failAt ? answer() : { status: 0 }), SERVICE, { maxTxnSize: size });
  } catch (err) {
    assert.ok(err instanceof ApplyError);
    return err;
  }
  assert.fail('expected the apply to fail');
}

function tooMany(): never {
  const inner = Object.assign(new Error('2 UNKNOWN: etcdserver: too many operations in txn request'), {
    code: 2,
    details: 'etcdserver: too many operations in txn request',
    metadata: {},
  });
  throw new TransportError('applying journal specs: UNKNOWN: etcdserver: too many operations in txn request', 2, { cause: inner });
}

describe('renderPlan', () => {
  it('prints one line per change and the summary', () => {
    const plan = planJournalChanges(
      [up('a/new', 0n), up('a/old', 5n, 9n), up('a/any', -1n), del('a/gone', 6n), del('a/x', -1n), up('a/same', 7n), up('a/taken', 0n), up('a/moved', 4n, 1n)],
      [cur('a/old', 5n), cur('a/gone', 6n), cur('a/x', 1n), cur('a/same', 7n), cur('a/taken', 8n), cur('a/moved', 9n)],
    );
    assert.equal(
      renderPlan(plan, 3, 'journal'),
      [
        'create  a/new',
        'update  a/old  (at revision 5)',
        'upsert  a/any  (any revision)',
        'delete  a/gone  (at revision 6)',
        'delete  a/x  (any revision)',
        'unchanged  a/same',
        'create  a/taken  CONFLICT: a/taken already exists at revision 8',
        'update  a/moved  (at revision 4)  CONFLICT: a/moved is at revision 9',
        '7 journal changes in 3 transactions, 1 unchanged; 2 conflicts: the apply would be refused; nothing applied (--dry-run).',
        '',
      ].join('\n'),
    );
  });
  it('counts no transaction when everything is unchanged', () => {
    const plan = planJournalChanges([up('a/same', 7n)], [cur('a/same', 7n)]);
    assert.equal(renderPlan(plan, 0, 'journal'), 'unchanged  a/same\n0 journal changes in 0 transactions, 1 unchanged; nothing applied (--dry-run).\n');
  });
});

describe('--max-txn-size', () => {
  it('counts transactions', () => {
    assert.equal(transactionCount(250, 0), 1);
    assert.equal(transactionCount(250, 100), 3);
    assert.equal(transactionCount(100, 100), 1);
  });
  it('rejects negative and fractional sizes naming the flag', () => {
    assert.throws(() => checkMaxTxnSize(-1), (e: unknown) => e instanceof ValidationError && e.message === '--max-txn-size: must be a non-negative integer (got -1)');
    assert.throws(() => checkMaxTxnSize(1.5), (e: unknown) => e instanceof ValidationError && /^--max-txn-size: /.test(e.message));
    assert.throws(() => transactionCount(3, -2), ValidationError);
  });
});

describe('explainApplyFailure', () => {
  it("etcd's operation limit names --max-txn-size and what was applied", async () => {
    const one = explainApplyFailure(await failure(200, 0, 0, tooMany));
    assert.ok(one instanceof GazctlError);
    assert.equal(
      one.message,
      'etcd refused a transaction of 200 changes (too many operations; etcd allows 128 per transaction by default). Re-run with --max-txn-size 100 to apply in smaller, non-atomic batches. Nothing was applied.',
    );
    assert.equal(exitCodeFor(one), 1);
    assert.equal(
      explainApplyFailure(await failure(200, 150, 0, tooMany)).message,
      'etcd refused a transaction of 150 changes (too many operations; etcd allows 128 per transaction by default). Re-run with --max-txn-size 100 to apply in smaller, non-atomic batches. Transaction 1 of 2 failed; nothing was applied.',
    );
    assert.equal(
      explainApplyFailure(await failure(400, 130, 1, tooMany)).message,
      'etcd refused a transaction of 130 changes (too many operations; etcd allows 128 per transaction by default). Re-run with --max-txn-size 100 to apply in smaller, non-atomic batches. Transaction 2 of 4 failed; the 130 changes of the transactions before it were applied.',
    );
  });

  it('a revision mismatch names the conflicts the plan predicted', async () => {
    const REFUSED =
      'apply refused: an item\'s revision does not match (it was changed or deleted since it was listed, or a "create" names one that already exists). Re-list, merge your changes and apply again.';
    const mismatch = () => ({ status: Status.ETCD_TRANSACTION_FAILED });
    assert.equal(explainApplyFailure(await failure(3, 0, 0, mismatch)).message, `${REFUSED} Nothing was applied.`);
    const plan = planJournalChanges(
      [up('a/1', 0n), up('a/2', 0n), up('a/3', 3n), up('a/4', 4n), up('a/5', 0n)],
      [cur('a/1', 9n), cur('a/2', 9n), cur('a/4', 9n), cur('a/5', 9n)],
    );
    assert.equal(
      explainApplyFailure(await failure(5, 2, 1, mismatch), plan).message,
      `${REFUSED} Transaction 2 of 3 failed; the 2 changes of the transactions before it were applied. Conflicts: a/1 already exists at revision 9; a/2 already exists at revision 9; a/3 does not exist; and 2 more.`,
    );
    const one = planJournalChanges([up('a/1', 0n)], [cur('a/1', 9n)]);
    assert.equal(explainApplyFailure(await failure(1, 0, 0, mismatch), one).message, `${REFUSED} Nothing was applied. Conflicts: a/1 already exists at revision 9.`);
  });

  it('anything else is "apply failed" with the failure itself and its exit code', async () => {
    const e = explainApplyFailure(await failure(3, 0, 0, () => ({ status: Status.NOT_ALLOWED })));
    assert.equal(e.message, 'apply failed: applying journal specs: NOT_ALLOWED. Nothing was applied.');
    const t = new TransportError('broker http://x is unreachable: connection refused', 14);
    const f = explainApplyFailure(
      await failure(30, 10, 2, () => {
        throw t;
      }),
    );
    assert.equal(
      f.message,
      'apply failed: broker http://x is unreachable: connection refused. Transaction 3 of 3 failed; the 20 changes of the transactions before it were applied.',
    );
    assert.equal(exitCodeFor(f), 1);
    // The exit code follows the cause: a usage error stays one when wrapped.
    const u = explainApplyFailure(
      await failure(3, 0, 0, () => {
        throw new UsageError('--max-txn-size: expected an integer >= 0, got -1');
      }),
    );
    assert.equal(exitCodeFor(u), 2);
  });
});

describe('applyJournalChanges', () => {
  function fakeClient(current: ListResponse_Journal[], answer: (batch: ApplyRequest_Change[], i: number) => ApplyResponse) {
    const sent: ApplyRequest_Change[][] = [];
    let lists = 0;
    const client = {
      list: async () => {
        lists++;
        return { status: Status.OK, header: undefined, journals: current } as ListResponse;
      },
      apply: (changes: ApplyRequest_Change[], opts?: ApplyOptions) =>
        applyInBatches(
          changes,
          async (batch) => {
            sent.push(batch);
            return answer(batch, sent.length - 1);
          },
          SERVICE,
          opts,
        ),
    };
    return { client, sent, lists: () => lists };
  }
  const ok = (rev: bigint) => (): ApplyResponse => ({ status: Status.OK, header: { process_id: undefined, route: undefined, etcd: { cluster_id: 1n, member_id: 1n, revision: rev, raft_term: 1n } } });

  it('lists once, sends only what changes, reports progress and the summary', async () => {
    const f = fakeClient([cur('a/same', 7n)], ok(42n));
    const progress: string[] = [];
    const changes = [up('a/same', 7n), ...Array.from({ length: 5 }, (_, i) => up(`a/n${i}`, 0n))];
    const r = await applyJournalChanges(f.client, changes, 2, (d, t) => progress.push(`${d}/${t}`));
    assert.equal(r.summary, 'applied 5 journal changes in 3 transactions (etcd revision 42); 1 unchanged');
    assert.equal(r.revision, 42n);
    assert.deepEqual(progress, ['2/5', '4/5', '5/5']);
    assert.deepEqual(f.sent.map((b) => b.length), [2, 2, 1]);
    assert.equal(f.lists(), 1);
  });

  it('says so when nothing changes, and sends nothing', async () => {
    const f = fakeClient([cur('a/same', 7n)], ok(1n));
    const r = await applyJournalChanges(f.client, [up('a/same', 7n)], 0);
    assert.equal(r.summary, 'nothing to apply: 1 journal unchanged');
    assert.equal(f.sent.length, 0);
  });

  it('turns a failed batch into the operator line', async () => {
    const f = fakeClient([cur('a/x', 3n)], (_b, i) => (i === 1 ? { status: Status.ETCD_TRANSACTION_FAILED, header: undefined } : ok(5n)()));
    await assert.rejects(applyJournalChanges(f.client, [up('a/1', 0n), up('a/x', 2n, 1n), up('a/2', 0n)], 1), (e: unknown) => {
      assert.ok(e instanceof GazctlError && !(e instanceof ApplyError));
      assert.match(e.message, /^apply refused: .* Transaction 2 of 3 failed; the 1 changes of the transactions before it were applied\. Conflicts: a\/x is at revision 3\.$/);
      return true;
    });
  });

  it('sends a run of creates without listing first, with the same summary', async () => {
    const f = fakeClient([], ok(9n));
    const r = await applyJournalChanges(f.client, Array.from({ length: 5 }, (_, i) => up(`a/n${i}`, 0n)), 2);
    assert.equal(r.summary, 'applied 5 journal changes in 3 transactions (etcd revision 9)');
    assert.deepEqual(f.sent.map((b) => b.length), [2, 2, 1]);
    assert.equal(f.lists(), 0);
  });

  it('names the conflicts of a refused run of creates from a listing made after the refusal', async () => {
    // a/2 existed before the run; batch 1 (a/0, a/1) went through, batch 2 (a/2, a/3) was refused.
    const f = fakeClient([cur('a/0', 8n), cur('a/1', 8n), cur('a/2', 3n)], (_b, i) => (i === 1 ? { status: Status.ETCD_TRANSACTION_FAILED, header: undefined } : ok(8n)()));
    const changes = Array.from({ length: 6 }, (_, i) => up(`a/${i}`, 0n));
    await assert.rejects(applyJournalChanges(f.client, changes, 2), (e: unknown) => {
      assert.ok(e instanceof GazctlError && !(e instanceof ApplyError));
      // Only a/2 is named: a/0 and a/1 exist because this run created them.
      assert.match(e.message, /^apply refused: .* Transaction 2 of 3 failed; the 2 changes of the transactions before it were applied\. Conflicts: a\/2 already exists at revision 3\.$/);
      return true;
    });
    assert.equal(f.lists(), 1);
    assert.deepEqual(f.sent.map((b) => b.length), [2, 2]);
  });

  it('explains a refused run of creates without conflicts when the listing after it fails', async () => {
    const f = fakeClient([], () => ({ status: Status.ETCD_TRANSACTION_FAILED, header: undefined }));
    f.client.list = async () => {
      throw new Error('broker unreachable');
    };
    await assert.rejects(applyJournalChanges(f.client, [up('a/1', 0n)], 0), (e: unknown) => {
      assert.ok(e instanceof GazctlError);
      assert.match(e.message, /^apply refused: .* Nothing was applied\.$/);
      return true;
    });
  });

  it('refuses a negative --max-txn-size (e.g. from gazctl.ini) before sending', async () => {
    const f = fakeClient([], ok(1n));
    await assert.rejects(applyJournalChanges(f.client, [up('a/1', 0n)], -1), /^ValidationError: --max-txn-size: must be a non-negative integer \(got -1\)$/);
    assert.equal(f.sent.length, 0);
  });
  it('with --parallel: names exactly the transactions applied, refused and not sent, and lists only the unapplied journals for conflicts', async () => {
    // a/4 existed before the run. Ten creates, one per transaction, four at a time: the stub
    // answers each window once it is full, so the second window (a/4..a/7) is all in flight
    // when a/4's transaction is refused, and a/5..a/7 still go through.
    const current = [cur('a/0', 8n), cur('a/1', 8n), cur('a/2', 8n), cur('a/3', 8n), cur('a/4', 3n), cur('a/5', 9n), cur('a/6', 9n), cur('a/7', 9n)];
    let held: { batch: ApplyRequest_Change[]; resolve: (r: ApplyResponse) => void }[] = [];
    let answered = 0;
    let maxInFlight = 0;
    const sent: string[] = [];
    const listed: string[][] = [];
    const client = {
      list: async (sel: { include?: { labels: { value: string }[] } }) => {
        listed.push((sel.include?.labels ?? []).map((l) => l.value));
        return { status: Status.OK, header: undefined, journals: current } as ListResponse;
      },
      apply: (changes: ApplyRequest_Change[], opts?: ApplyOptions) =>
        applyInBatches(
          changes,
          (batch) =>
            new Promise<ApplyResponse>((resolve) => {
              sent.push(batch[0]!.upsert!.name);
              held.push({ batch, resolve });
              maxInFlight = Math.max(maxInFlight, held.length);
              if (held.length === Math.min(4, 10 - answered)) {
                const window = held.reverse();
                held = [];
                for (const h of window) {
                  answered++;
                  h.resolve(h.batch[0]!.upsert!.name === 'a/4' ? { status: Status.ETCD_TRANSACTION_FAILED, header: undefined } : ok(20n)());
                }
              }
            }),
          SERVICE,
          opts,
        ),
    };
    const progress: string[] = [];
    const changes = Array.from({ length: 10 }, (_, i) => up(`a/${i}`, 0n));
    await assert.rejects(applyJournalChanges(client, changes, 1, (d, t) => progress.push(`${d}/${t}`), 4), (e: unknown) => {
      assert.ok(e instanceof GazctlError && !(e instanceof ApplyError));
      assert.match(
        e.message,
        /^apply refused: .* Transactions 1-4 and 6-8 of 10 were applied \(7 changes\); 5 failed; 9-10 were not sent\. Conflicts: a\/4 already exists at revision 3\.$/,
      );
      return true;
    });
    assert.equal(maxInFlight, 4);
    assert.deepEqual(sent, ['a/0', 'a/1', 'a/2', 'a/3', 'a/4', 'a/5', 'a/6', 'a/7']);
    assert.deepEqual(progress, ['1/10', '2/10', '3/10', '4/10', '5/10', '6/10', '7/10']);
    assert.equal(listed.length, 1, 'one listing, after the refusal');
  });
});

describe('--parallel failure lines', () => {
  const REFUSED =
    'apply refused: an item\'s revision does not match (it was changed or deleted since it was listed, or a "create" names one that already exists). Re-list, merge your changes and apply again.';
  const err = (batchIndex: number, applied: number[], failed: number[], batches = 10, size = 100) =>
    new ApplyError('x', 'revision-mismatch', batchIndex, batches, size, applied.length * size, batches * size, Status.ETCD_TRANSACTION_FAILED, 'ETCD_TRANSACTION_FAILED', 'x', undefined, applied, failed);

  it('keeps the one-at-a-time wording when exactly the transactions before the failed one were applied', () => {
    assert.equal(explainApplyFailure(err(4, [0, 1, 2, 3], [4, 5])).message, `${REFUSED} Transaction 5 of 10 failed; the 400 changes of the transactions before it were applied.`);
    assert.equal(explainApplyFailure(err(0, [], [0, 1, 2])).message, `${REFUSED} Transaction 1 of 10 failed; nothing was applied.`);
  });

  it('otherwise names the applied, failed and unsent transactions as ranges', () => {
    assert.equal(
      explainApplyFailure(err(4, [0, 1, 2, 3, 5], [4])).message,
      `${REFUSED} Transactions 1-4 and 6 of 10 were applied (500 changes); 5 failed; 7-10 were not sent.`,
    );
    assert.equal(explainApplyFailure(err(0, [1], [0])).message, `${REFUSED} Transaction 2 of 10 was applied (100 changes); 1 failed; 3-10 were not sent.`);
    assert.equal(
      explainApplyFailure(err(7, [0, 1, 2, 3, 4, 5, 6, 9], [7, 8])).message,
      `${REFUSED} Transactions 1-7 and 10 of 10 were applied (800 changes); 8-9 failed.`,
    );
    assert.equal(
      explainApplyFailure(err(1, [0, 3], [1, 2], 5, 1)).message,
      `${REFUSED} Transactions 1 and 4 of 5 were applied (2 changes); 2-3 failed; 5 was not sent.`,
    );
    assert.equal(explainApplyFailure(err(0, [2], [0, 1], 3, 1)).message, `${REFUSED} Transaction 3 of 3 was applied (1 change); 1-2 failed.`);
  });

  it('ranges', () => {
    assert.equal(ranges([]), '');
    assert.equal(ranges([0]), '1');
    assert.equal(ranges([0, 1, 2, 3, 5]), '1-4 and 6');
    assert.equal(ranges([0, 2, 4]), '1, 3 and 5');
    assert.equal(ranges([1, 2, 5, 6, 7, 9]), '2-3, 6-8 and 10');
  });
});
