// YAML spec formats (journal hierarchies, shard sets), their Go-compatible emitter, and
// Apply batching.
export {
  emitGoYaml,
  goStringStyle,
  resolvePlain,
  StrictDoc,
  YamlDecodeError,
  type ResolvedKind,
  type YamlMapping,
  type YamlValue,
} from './goyaml.js';
export {
  buildJournalApplyRequest,
  decodeJournalTree,
  encodeJournalTree,
  flattenJournalTree,
  isDirectoryNode,
  journalTreeFromListing,
  normalizeJournalSpec,
  validateJournalTree,
  type JournalNode,
} from './journalspace.js';
export {
  buildShardApplyRequest,
  decodeShardSet,
  encodeShardSet,
  flattenShardSet,
  normalizeShardSpec,
  shardSetFromListing,
  validateShardSet,
  type ShardSet,
  type ShardSetEntry,
} from './shardspace.js';
export { batchChanges, ETCD_DEFAULT_MAX_TXN_OPS } from './batch.js';
export {
  journalSpecFromProtoJson,
  journalsFromListJson,
  parseProtoJsonDuration,
  shardSpecFromProtoJson,
  shardsFromListJson,
} from './protojson.js';
export { intersectLabels, subtractLabels, unionLabels } from './labelsets.js';
