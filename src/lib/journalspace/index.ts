// The journal hierarchy YAML format: decode, validate, flatten, build from listings, encode.
export {
  buildJournalApplyRequest,
  decodeJournalTree,
  encodeJournalTree,
  encodeJournalTreeBytes,
  flattenJournalTree,
  isDirectoryNode,
  journalTreeFromListing,
  normalizeJournalSpec,
  validateJournalTree,
  type JournalNode,
} from './journalspace.js';
