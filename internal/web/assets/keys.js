// Where the browser keeps API keys: the key in use for this tab in
// sessionStorage, and the keys a person chose to remember in localStorage
// (the "saved keys" that switch accounts). Keys never go into a URL.

const CURRENT = 'mailsink.key';
const SAVED = 'mailsink.savedKeys';

export function currentKey() {
  return sessionStorage.getItem(CURRENT) || '';
}

export function setCurrentKey(key) {
  if (key) sessionStorage.setItem(CURRENT, key);
  else sessionStorage.removeItem(CURRENT);
}

/** The saved keys, most recently used first: [{key, account: {slug, name}}]. */
export function savedKeys() {
  try {
    const list = JSON.parse(localStorage.getItem(SAVED) || '[]');
    return Array.isArray(list) ? list.filter((s) => s && typeof s.key === 'string') : [];
  } catch {
    return [];
  }
}

export function saveKey(key, account) {
  const list = savedKeys().filter((s) => s.key !== key);
  list.unshift({ key, account: { slug: account.slug, name: account.name } });
  localStorage.setItem(SAVED, JSON.stringify(list));
}

export function forgetKey(key) {
  localStorage.setItem(SAVED, JSON.stringify(savedKeys().filter((s) => s.key !== key)));
}

export function isSaved(key) {
  return savedKeys().some((s) => s.key === key);
}
