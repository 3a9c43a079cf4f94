// The sign-in page: an API key field, the saved keys, and a clear message
// when a key was refused.
import { h } from './dom.js';
import { savedKeys, forgetKey } from './keys.js';

/**
 * Shows the sign-in page in root. onSignIn(key, remember) resolves when
 * signed in, or rejects with an error whose message is shown.
 */
export function showSignIn(root, { message = '', onSignIn }) {
  const alert = h('p', { class: 'signin-message', role: 'alert', id: 'signin-message' }, message);
  alert.hidden = !message;
  const keyInput = h('input', {
    id: 'api-key', name: 'api-key', type: 'password', autocomplete: 'off', required: true,
    spellcheck: false, 'aria-describedby': 'signin-help',
  });
  const remember = h('input', { id: 'remember', type: 'checkbox', checked: true });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in');

  async function attempt(key, keep) {
    submit.disabled = true;
    alert.hidden = true;
    try {
      await onSignIn(key, keep);
    } catch (err) {
      alert.textContent = err.message;
      alert.hidden = false;
      submit.disabled = false;
      keyInput.focus();
    }
  }

  const form = h('form', {
    class: 'signin-form', 'aria-labelledby': 'signin-title',
    onsubmit: (e) => {
      e.preventDefault();
      const key = keyInput.value.trim();
      if (key) attempt(key, remember.checked);
    },
  },
  h('label', { for: 'api-key' }, 'API key'),
  keyInput,
  h('p', { id: 'signin-help', class: 'hint' },
    'The key of the account whose mail you want to see. mailsink prints a sign-in link with it when it starts.'),
  h('div', { class: 'checkbox' }, remember, h('label', { for: 'remember' }, 'Remember this key on this browser')),
  submit);

  const saved = savedKeys();
  const savedList = saved.length ? h('section', { class: 'saved-keys', 'aria-labelledby': 'saved-title' },
    h('h2', { id: 'saved-title' }, 'Saved keys'),
    h('ul', {}, saved.map((s) => h('li', {},
      h('button', { type: 'button', class: 'saved-key', onclick: () => attempt(s.key, true) },
        `Sign in as ${s.account.name} (${s.account.slug})`),
      h('button', {
        type: 'button', class: 'link', 'aria-label': `Forget the key of ${s.account.name}`,
        onclick: (e) => {
          forgetKey(s.key);
          e.target.closest('li').remove();
        },
      }, 'Forget'))))) : null;

  root.replaceChildren(h('main', { class: 'signin', id: 'main' },
    h('h1', { id: 'signin-title' }, 'mailsink'),
    h('p', { class: 'tagline' }, 'Sign in to see the mail your applications sent.'),
    alert, form, savedList));
  keyInput.focus();
}

/** The message for a key the server refused. */
export function refusedMessage(err) {
  if (err.status === 401) return 'That API key was not accepted: it is wrong, or it was revoked. Check the key and sign in again.';
  if (err.status === 429) return 'Too many wrong keys were tried from this address. Wait a minute, then try again.';
  if (err.status) return `Signing in failed: ${err.message}`;
  return 'mailsink could not be reached. Is it running?';
}
