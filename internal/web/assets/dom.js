// A tiny helper to build the page from data without ever parsing HTML:
// every string becomes a text node or a property value, never markup.

/**
 * h('button', {class: 'primary', onclick: fn}, 'Save') builds an element.
 * Attributes: "class", "on*" (listeners), "dataset"; booleans and
 * properties such as "value" are set as properties, the rest as attributes.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      el.addEventListener(name.slice(2), value);
    } else if (name === 'class') {
      el.className = value;
    } else if (name === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(name, '');
    } else if (name in el && !name.includes('-') && name !== 'list' && name !== 'form') {
      el[name] = value;
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces the children of el. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const countFormat = new Intl.NumberFormat();
const sizeFormat = new Intl.NumberFormat(undefined, { minimumFractionDigits: 1, maximumFractionDigits: 1 });

/** Formats a count for people, with the locale's thousands separators. */
export function formatCount(n) {
  return countFormat.format(n);
}

/** Formats a byte count for people. */
export function formatBytes(n) {
  if (n < 1024) return `${formatCount(n)} B`;
  if (n < 1024 * 1024) return `${sizeFormat.format(n / 1024)} KB`;
  return `${sizeFormat.format(n / 1024 / 1024)} MB`;
}

/** "1 message", "1,234 messages". */
export function messages(n) {
  return `${formatCount(n)} ${n === 1 ? 'message' : 'messages'}`;
}

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const timeFormat = new Intl.DateTimeFormat(undefined, { timeStyle: 'short' });
const dayFormat = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });

/** A full date and time. */
export function formatDate(iso) {
  return dateFormat.format(new Date(iso));
}

/** The time for today's mail, else the day. */
export function formatShortDate(iso) {
  const d = new Date(iso);
  return d.toDateString() === new Date().toDateString() ? timeFormat.format(d) : dayFormat.format(d);
}
