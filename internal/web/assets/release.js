// Release: sending captured messages, as they were received, to real
// recipients through the account's relay (the accounts file's relay entry),
// for a look in a real inbox. The server decides who may receive them
// (the relay's allowedRecipients) and says so when the account has no relay.
import { h } from './dom.js';

/**
 * Asks for the addresses to release what (e.g. "this message") to; resolves
 * with them, or null when the person cancels.
 */
export function askRecipients(what) {
  return new Promise((resolve) => {
    const input = h('input', {
      id: 'release-to', type: 'text', required: true, autocomplete: 'off', spellcheck: false,
      placeholder: 'name@example.com, other@example.com',
    });
    const dialog = h('dialog', { class: 'release', id: 'release-dialog', 'aria-labelledby': 'release-title' },
      h('form', { method: 'dialog' },
        h('h2', { id: 'release-title' }, `Release ${what}`),
        h('p', { class: 'hint' }, 'Sends it as it was received, through the mail server set for this account, to real inboxes.'),
        h('label', { for: 'release-to' }, 'To (addresses, separated by commas)'),
        input,
        h('div', { class: 'buttons' },
          h('button', { value: 'no', formnovalidate: true }, 'Cancel'),
          h('button', { value: 'yes', class: 'primary', id: 'release-send' }, 'Release'))));
    dialog.addEventListener('close', () => {
      dialog.remove();
      const to = input.value.split(/[\s,;]+/).filter(Boolean);
      resolve(dialog.returnValue === 'yes' && to.length ? to : null);
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/**
 * Releases the messages one after another (the server bounds how many of an
 * account's releases run at once), skipping those deleted meanwhile, and
 * stops at the first refusal: the others would meet it too (no relay, a
 * recipient not allowed, the rate used up). Resolves with
 * {released, error}, error null when every message went.
 */
export async function releaseEach(client, ids, to) {
  let released = 0;
  for (const id of ids) {
    try {
      await client.release(id, to);
      released++;
    } catch (err) {
      if (err.status !== 404) return { released, error: err };
    }
  }
  return { released, error: null };
}
