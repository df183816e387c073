// The options a context may hold: those of the `journals` and `shards` groups, and the etcd
// endpoints `gazctl health` checks (given by the caller, which owns them). Kept apart from
// contexts.ts, which base.ts imports, so that it can import base.ts.
import { journalsOptions, shardsOptions } from './base.js';
import type { OptionSet } from './options.js';

export function contextOptions(extra: OptionSet = {}): OptionSet {
  return { ...journalsOptions, ...shardsOptions, ...extra };
}
