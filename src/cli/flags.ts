// Flag groups shared across commands, kept in one place so every command spells them alike.
import { Flags } from '@oclif/core';
import { parseLabelSelector } from '../lib/protocol/selector.js';
import type { LabelSelector } from '../lib/protocol/gen/broker/protocol.js';
import { UsageError } from './base.js';

export const selectorFlag = (required: boolean, what = 'journals') =>
  Flags.string({
    char: 'l',
    description: `Label selector of the ${what} to act on, e.g. "app=foo,name:prefix=acme/"${required ? '' : ' (default: all)'}.`,
  });

export const maxTxnSizeFlag = Flags.integer({
  description:
    'Apply at most this many changes per etcd transaction (0 = all in one). etcd allows 128 operations per transaction by default; batches are applied one after another and are not atomic as a whole.',
  default: 0,
  min: 0,
});

export const dryRunFlag = Flags.boolean({ description: 'Show what would be done and change nothing.', default: false });

/** Parses -l; an empty selector matches everything. `required` mirrors upstream's required flags. */
export function selectorFrom(text: string | undefined, required: boolean): LabelSelector {
  if (text === undefined || text === '') {
    if (required) throw new UsageError('missing required flag -l/--selector (use -l name:prefix=... or a label selector)');
    return { include: { labels: [] }, exclude: { labels: [] } };
  }
  return parseLabelSelector(text);
}
