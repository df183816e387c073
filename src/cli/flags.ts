// Option descriptors shared across commands, kept in one place so every command spells them alike.
import { booleanOption, intOption, selectorOption, type IniPlace } from './options.js';

export { selectorOption };

/** -l/--selector; `ini` null where upstream reads it only from the command line (edit). */
export const selector = (required: boolean, ini: IniPlace | null = { field: 'Selector' }, what = 'journals') =>
  selectorOption({ required, what, ini });

export const maxTxnSize = () =>
  intOption({
    description:
      'Apply at most this many changes per etcd transaction (0 = all in one). etcd allows 128 operations per transaction by default; each batch is atomic, the whole is not (see --parallel).',
    default: 0,
    min: 0,
    ini: { field: 'MaxTxnSize' },
  });

export const dryRun = () => booleanOption({ description: 'Show what would be done and change nothing.', ini: { field: 'DryRun' } });

/**
 * --parallel: how many --max-txn-size transactions may be in flight at once. Ours (upstream
 * sends them one after another), so like our other additions to sub-commands it is read from
 * the command line only, not from gazctl.ini.
 */
export const parallel = () =>
  intOption({
    description:
      'With --max-txn-size, send up to this many transactions at once (1 = one after another, as upstream). Each is still atomic on its own; if one fails, no more are sent, and those already in flight may still be applied.',
    default: 4,
    min: 1,
    showDefault: true,
    ini: null,
  });
