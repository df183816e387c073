// The shard set YAML format: a `common` partial ShardSpec shared by a list of `shards`.
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
