import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { sendUnaryData, ServerReadableStream, ServerWritableStream } from '@grpc/grpc-js';
import { AppendRequest, Status, type AppendResponse, type ReadRequest, type ReadResponse } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { JournalClient } from '../../../../src/lib/client/journal-client.js';
import { startJournalStub } from '../../../../src/testing/stubs.js';
import { MemoryLogSource } from '../../../../src/lib/recoverylog/memory-source.js';
import { LogWriter } from '../../../../src/lib/recoverylog/record.js';
import { emptyHints } from '../../../../src/lib/recoverylog/hints.js';
import { journalLogSource, playLog } from '../../../../src/lib/recoverylog/player.js';
import { appendOk, contentResponse, fragment, metaResponse, statusResponse } from '../client/helpers.js';
import { bytes, commit, snapshot, tempDir } from './helpers.js';

const LOG = 'recovery/logs/shard-001';

/** A one-journal broker: reads of its content (non-blocking, end_offset, metadata-only) and appends. */
function broker(content: { data: Buffer }, appends: Buffer[]) {
  return {
    read(call: ServerWritableStream<ReadRequest, ReadResponse>) {
      const req = call.request;
      const head = BigInt(content.data.length);
      let off = req.offset < 0n ? head : req.offset;
      const end = req.end_offset > 0n && req.end_offset < head ? req.end_offset : head;
      if (off >= head) {
        call.write(statusResponse(Status.OFFSET_NOT_YET_AVAILABLE, { offset: head, write_head: head }));
        call.end();
        return;
      }
      call.write(metaResponse(off, fragment(req.journal, 0n, head), head, { first: true }));
      if (!req.metadata_only) {
        while (off < end) {
          const n = end - off < 13n ? end - off : 13n;
          call.write(contentResponse(off, content.data.subarray(Number(off), Number(off + n))));
          off += n;
        }
      }
      call.end();
    },
    append(call: ServerReadableStream<AppendRequest, AppendResponse>, cb: sendUnaryData<AppendResponse>) {
      const parts: Buffer[] = [];
      call.on('data', (m: AppendRequest) => {
        if (m.content.length) parts.push(m.content);
      });
      call.on('end', () => {
        const add = Buffer.concat(parts);
        appends.push(add);
        const begin = BigInt(content.data.length);
        content.data = Buffer.concat([content.data, add]);
        cb(null, appendOk(LOG, begin, BigInt(content.data.length)));
      });
    },
  };
}

async function recordedLog(): Promise<Buffer> {
  const mem = new MemoryLogSource();
  const w = new LogWriter({ log: LOG, author: 3 });
  const f = w.create('/data/000001.sst');
  await commit(mem, w, f, w.write(f.fnode, bytes('x'.repeat(300)), 0n), w.property('/IDENTITY', 'id\n'));
  const g = w.create('/MANIFEST');
  await commit(mem, w, g, w.write(g.fnode, bytes('manifest'), 0n));
  await mem.head(LOG);
  const parts: Uint8Array[] = [];
  for await (const c of mem.read(LOG, 0n)) parts.push(c.content);
  return Buffer.concat(parts);
}

describe('journalLogSource', () => {
  for (const mode of ['barrier', 'write-head'] as const) {
    it(`plays a log from a broker, the head found by ${mode}`, async () => {
      const content = { data: await recordedLog() };
      const appends: Buffer[] = [];
      const stub = await startJournalStub(broker(content, appends));
      const client = new JournalClient({ address: stub.address });
      try {
        const dir = tempDir();
        const res = await playLog(journalLogSource(client, { head: mode }), emptyHints(LOG), dir);
        assert.deepEqual(Object.keys(snapshot(dir)), ['/IDENTITY', '/MANIFEST', '/data/000001.sst']);
        assert.equal(res.heads.get(LOG), BigInt(content.data.length));
        // A barrier is one empty append; the write-head mode writes nothing.
        assert.deepEqual(appends.map((a) => a.length), mode === 'barrier' ? [0] : []);

        // Reads stop at the head asked for, even when the journal grew since.
        const src = journalLogSource(client, { head: mode });
        const head = await src.head(LOG);
        content.data = Buffer.concat([content.data, Buffer.from('more content written later')]);
        let read = 0;
        for await (const c of src.read(LOG, 0n)) read += c.content.length;
        assert.equal(BigInt(read), head);
      } finally {
        client.close();
        await stub.stop();
      }
    });
  }
});
