// The broker's fragment layer: spools, the persister and the per-journal fragment index.
//
// How a broker uses it, per journal it replicates:
//
//   const index = new FragmentIndex(journal, { openStore });       // reads, ListFragments
//   void runIndexRefresh(index, { spec: () => ({ stores, refreshIntervalMs }), open, signal });
//   const spool = new Spool(journal, {
//     dir,                                                        // --broker spool dir, or tmp
//     observer: {
//       onCommit: (lf) => index.spoolCommit(lf),                  // serve reads from the spool
//       onComplete: (lf) => void persister.persist(lf, spec()),   // primary: persist now
//     },
//   });
//
// Appends (primary) and Replicate (replicas), with ReplicateRequest fields in brackets:
//   proposal = nextProposal(spool, spec.fragment, { rollToOffset, now, flush })  // roll rules
//   spool.applyProposal(proposal, registers)     // [proposal, registers]: sync / roll / commit;
//                                                // PROPOSAL_MISMATCH carries our fragment
//   spool.apply(content, delta)                  // [content, content_delta]: staged only
//   spool.next()                                 // the proposal that commits what is staged
//   spool.applyProposal(spool.next(), registers) // commit (onCommit fires)
//   spool.rollback()                             // drop staged content (also: propose current)
//   spool.roll(codec)                            // close where it is (owner alone / shutdown)
//
// Reads: `await index.query({ offset, block, beginModTime, signal })` gives the fragment covering
// the offset (OK; `local` set when it is spool content: read it with readLocal/streamLocal;
// otherwise open `fragment` from its backing store, or sign a URL with `index.signedUrl`), or
// OFFSET_NOT_YET_AVAILABLE with the write head when not blocking. `index.waitFor(offset)` waits
// for an offset; `index.endOffset()` is the journal's write head as far as the index knows;
// `index.firstRefresh` resolves after the first store listing (appends should wait for it).
// ListFragments: `await index.list({ pageToken, pageLimit, beginModTime, endModTime,
// signatureTtlMs })` gives `{ fragments: [{ spec, signedUrl }], nextPageToken }`.
//
// Persisting: `await persister.persist(lf, journalSpec, { signal, exiting })` resolves with the
// stored fragment (backing_store, path_postfix, an approximate mod_time) once the object is in
// the journal's first store; it retries with backoff meanwhile, and is idempotent. After it
// resolves, the next index refresh replaces the local fragment with the stored one; an
// on-demand flush should make that immediate with `index.addRemote(fragment)`. `persister.pendingBytes` and the hooks feed
// metrics; `spoolStats` counts spool files and bytes on disk.
//
// Codecs come from the library (`compressor(codec)` in src/lib/codecs): SNAPPY and ZSTANDARD
// through native packages (libzstd at the Go broker's level), with portable fallbacks where those
// do not load (ZSTANDARD then stored uncompressed in valid zstd frames): docs/core-fragments.md.
export * from './spool.js';
export * from './persister.js';
export * from './fragment-index.js';
export { evaluatePostfixTemplate, PostfixTemplateError, type PostfixSpool } from './postfix.js';
export { formatGoTime, goTimeString } from './gotime.js';
