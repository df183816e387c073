// Option descriptors shared across commands, kept in one place so every command spells them alike.
import { booleanOption, intOption, selectorOption, type IniPlace } from './options.js';

export { selectorOption };

/** -l/--selector; `ini` null where upstream reads it only from the command line (edit). */
export const selector = (required: boolean, ini: IniPlace | null = { field: 'Selector' }, what = 'journals') =>
  selectorOption({ required, what, ini });

export const maxTxnSize = () =>
  intOption({
    description:
      'Apply at most this many changes per etcd transaction (0 = all in one). etcd allows 128 operations per transaction by default; batches are applied one after another and are not atomic as a whole.',
    default: 0,
    min: 0,
    ini: { field: 'MaxTxnSize' },
  });

export const dryRun = () => booleanOption({ description: 'Show what would be done and change nothing.', ini: { field: 'DryRun' } });
