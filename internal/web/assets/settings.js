// The settings menu: the theme (the system's, light or dark) and
// notifications of new mail, both kept in this browser.
import { h } from './dom.js';

const THEME = 'mailsink.theme';
const NOTIFY = 'mailsink.notify';

/** Applies the theme kept in this browser: '' follows the system. */
export function applyTheme(theme = localStorage.getItem(THEME) || '') {
  if (theme === 'light' || theme === 'dark') document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

/** Whether the person asked for notifications of new mail (and the browser allows them). */
export function notifying() {
  return localStorage.getItem(NOTIFY) === '1' && 'Notification' in window && Notification.permission === 'granted';
}

/** The settings button and its popover. */
export function settingsMenu() {
  const theme = h('select', {
    id: 'theme',
    onchange: () => {
      if (theme.value) localStorage.setItem(THEME, theme.value);
      else localStorage.removeItem(THEME);
      applyTheme(theme.value);
    },
  }, h('option', { value: '' }, 'System'), h('option', { value: 'light' }, 'Light'), h('option', { value: 'dark' }, 'Dark'));
  theme.value = localStorage.getItem(THEME) || '';
  const note = h('p', { class: 'hint', id: 'notify-note' });
  const notify = h('input', {
    type: 'checkbox', id: 'notify', checked: notifying(),
    onchange: async () => {
      note.textContent = '';
      if (!notify.checked) {
        localStorage.removeItem(NOTIFY);
        return;
      }
      if (!('Notification' in window)) {
        notify.checked = false;
        note.textContent = 'This browser has no notifications.';
        return;
      }
      const permission = Notification.permission === 'granted' ? 'granted' : await Notification.requestPermission();
      if (permission !== 'granted') {
        notify.checked = false;
        note.textContent = 'The browser did not allow notifications for this page.';
        return;
      }
      localStorage.setItem(NOTIFY, '1');
    },
  });
  const menu = h('div', { id: 'settings', class: 'settings', popover: 'auto', role: 'dialog', 'aria-labelledby': 'settings-title' },
    h('h2', { id: 'settings-title' }, 'Settings'),
    h('div', { class: 'field inline' }, h('label', { for: 'theme' }, 'Theme'), theme),
    h('div', { class: 'checkbox' }, notify, h('label', { for: 'notify' }, 'Notify me of new mail while this tab is in the background')),
    note);
  const button = h('button', { type: 'button', class: 'link', id: 'settings-button', popovertarget: 'settings' }, 'Settings');
  return [button, menu];
}
