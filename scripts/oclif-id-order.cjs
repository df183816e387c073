// The order oclif sorts its commands in (by id, with localeCompare), without setting an ICU
// collator up for ids where that order is plain: ids of lower-case ASCII letters, ':' and '-'
// under the C or POSIX locale or an English one, whose collation ranks '-' < ':' < letters and
// letters alphabetically, which is the order of their character codes. Any other id, or locale,
// is compared with localeCompare as before. scripts/bundle.mjs puts this function in the oclif
// bundle; `env` is the process environment, whose LC_ALL, LC_MESSAGES and LANG (in that order)
// are where the locale comes from.
'use strict';

function idOrder(env) {
  const loc = env.LC_ALL || env.LC_MESSAGES || env.LANG || '';
  const plain = loc === '' || loc === 'C' || loc === 'POSIX' || /^C[.@]/.test(loc) || /^en([_.@-]|$)/.test(loc);
  const simple = /^[a-z:-]*$/;
  return (a, b) => (plain && simple.test(a) && simple.test(b) ? (a < b ? -1 : a > b ? 1 : 0) : a.localeCompare(b));
}

module.exports = { idOrder };
