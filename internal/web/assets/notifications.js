// What tells a person about mail while they look elsewhere: the unread
// count on the tab's icon and in its title, and, when they asked for it,
// a browser notification for each new message.
import { notifying } from './settings.js';

const ICON = '/ui/icon.svg';

/** Shows the unread count (a number, or null when unknown) on the icon and in the title. */
export function showUnread(count, title) {
  document.title = count > 0 ? `(${count > 999 ? '999+' : count}) ${title}` : title;
  let link = document.querySelector('link[rel=icon]');
  if (!link) {
    link = document.createElement('link');
    link.rel = 'icon';
    document.head.append(link);
  }
  if (!(count > 0)) {
    link.href = ICON;
    link.type = 'image/svg+xml';
    return;
  }
  const text = count > 99 ? '99+' : String(count);
  const svg = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">' +
    '<rect width="32" height="32" rx="6" fill="#2563eb"/><path d="M6 10h20v12H6z" fill="none" stroke="#fff" stroke-width="2"/>' +
    '<path d="M6 10l10 8 10-8" fill="none" stroke="#fff" stroke-width="2"/>' +
    `<circle cx="${text.length > 2 ? 20 : 23}" cy="9" r="${text.length > 2 ? 12 : 9}" fill="#dc2626"/>` +
    `<text x="${text.length > 2 ? 20 : 23}" y="13" font-family="sans-serif" font-size="${text.length > 1 ? 10 : 12}" font-weight="bold" fill="#fff" text-anchor="middle">${text}</text></svg>`;
  link.type = 'image/svg+xml';
  link.href = `data:image/svg+xml,${encodeURIComponent(svg)}`;
}

/** Notifies of a new message, when asked for and the tab is not in front; a click opens it. */
export function notifyNew(item) {
  if (!notifying() || (!document.hidden && document.hasFocus())) return;
  const n = new Notification(`New mail from ${item.fromName || item.sender}`, {
    body: `${item.subject || '(no subject)'}\nto ${item.recipient}`, tag: item.id, icon: ICON,
  });
  n.onclick = () => {
    window.focus();
    location.hash = `#/emails/${item.id}`;
    n.close();
  };
}
