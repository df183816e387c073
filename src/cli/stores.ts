// Fragment stores as the commands open them: file:// stores under --file-root, and, where that
// flag is missing, an error that names it.
import { openStore, StoreError, type FragmentStore } from '../lib/stores/index.js';

/**
 * openStore with the command's --file-root. A file:// store needs a local directory to be read
 * or changed here: without one, the library's error gains which flag gives it.
 */
export function openCommandStore(url: string, fileRoot: string | undefined): FragmentStore {
  try {
    return openStore(url, { fileRoot });
  } catch (e) {
    if (!fileRoot && e instanceof StoreError && /^file:/i.test(url)) {
      throw new StoreError(`${e.message} (pass --file-root: the local directory under which file:// stores live, as the brokers' --broker.file-root)`, { cause: e });
    }
    throw e;
  }
}
