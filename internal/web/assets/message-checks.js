// The checks tabs of the message view: HTML compatibility with email
// clients, what the links answer, the spam score and the authentication
// (GET /v1/emails/{id}/checks/...). Each tab leads with one summary line and
// then the details. Everything shown comes from the message or the servers
// it names, so it is text only: no URL from a message is made a link.
import { h, replace } from './dom.js';

/** The checks' tabs: [tab name, label, check name]. */
export const CHECK_TABS = [
  ['check-html', 'Compatibility', 'html'],
  ['check-links', 'Link check', 'links'],
  ['check-spam', 'Spam', 'spam'],
  ['check-auth', 'Authentication', 'auth'],
];

/**
 * Fills the panel of a check tab for email id. shown() tells whether the
 * view still shows that email when an answer arrives.
 */
export function fillCheck(client, panel, tab, id, shown) {
  const [, , name] = CHECK_TABS.find((t) => t[0] === tab);
  if (name === 'links') {
    // Fetching the links is visible to the message's author: it waits for
    // the person to ask.
    replace(panel,
      h('p', { class: 'hint' }, 'The link check fetches every link and image of this message from the server (HEAD, or GET when HEAD is refused). Whoever sent it can see those requests.'),
      h('p', { class: 'toolbar' }, h('button', { type: 'button', id: 'run-check-links', onclick: () => run(client, panel, name, id, shown, false) }, 'Check links')));
    return;
  }
  run(client, panel, name, id, shown, false);
}

async function run(client, panel, name, id, shown, refresh) {
  replace(panel, h('p', { class: 'empty', role: 'status' }, name === 'links' ? 'Fetching the links…' : 'Running the check…'));
  let result;
  try {
    result = await client.check(id, name, refresh);
  } catch (err) {
    if (!shown()) return;
    replace(panel, h('p', { class: 'check-summary check-bad', id: `check-summary-${name}`, role: 'status' }, failure(name, err)));
    return;
  }
  if (!shown()) return;
  const again = h('button', { type: 'button', class: 'check-again', onclick: () => run(client, panel, name, id, shown, true) }, 'Run again');
  const [summary, ok, details] = RENDER[name](result);
  replace(panel,
    h('div', { class: 'toolbar' },
      h('p', { class: `check-summary ${ok ? 'check-ok' : 'check-bad'}`, id: `check-summary-${name}`, role: 'status' }, summary),
      again),
    h('p', { class: 'hint' }, `Checked ${new Date(result.checkedAt).toLocaleString()}.`),
    details);
}

function failure(name, err) {
  if (name === 'spam' && err.status === 409) return 'The spam check is not set up on this server: it needs a SpamAssassin spamd (MAILSINK_SPAMD_ADDR).';
  if (name === 'spam' && err.status === 502) return `SpamAssassin could not score the message: ${err.message}`;
  return `The check could not run: ${err.message}`;
}

const pct = (n) => `${Math.round(n * 10) / 10}%`;
const clientName = (c) => `${c.familyName} ${c.platformName} (${c.version})`;

const RENDER = {
  html(r) {
    const n = r.warnings.length;
    const summary = `${pct(r.total.supported)} supported, ${pct(r.total.partial)} partly, ${pct(r.total.unsupported)} not: ` +
      `${n} of the ${r.total.features} features this HTML uses ${n === 1 ? 'is' : 'are'} missing in some clients`;
    const details = n === 0 ? h('p', { class: 'empty' }, 'Every email client in the data supports what this HTML uses.')
      : h('ul', { class: 'check-list' }, r.warnings.map((w) => h('li', {},
        h('details', {},
          h('summary', {}, h('strong', {}, w.title), ` (${w.feature}, used ${w.occurrences}×): `,
            `not supported in ${w.unsupported.length}, partly in ${w.partial.length} of the clients`),
          clientList('Not supported', w.unsupported),
          clientList('Partly supported', w.partial),
          w.notes ? h('p', { class: 'hint' }, w.notes) : null,
          h('p', { class: 'hint' }, `More: ${w.url}`)))));
    return [summary, r.total.unsupported === 0 && r.total.partial === 0,
      [details, h('p', { class: 'hint' }, `Data: ${r.data.source}, ${r.data.updated}.`)]];
  },

  links(r) {
    const broken = r.items.filter((i) => i.status === null || i.status >= 400).length;
    const summary = `${r.items.length - broken} of ${r.items.length} links and images answer; ${broken} broken or unreachable` +
      (r.omitted ? ` (${r.omitted} more not checked)` : '');
    const details = r.items.length === 0 ? h('p', { class: 'empty' }, 'This message has no http or https links or images.')
      : h('table', { class: 'check-table' },
        h('caption', { class: 'visually-hidden' }, 'What each link answered'),
        h('thead', {}, h('tr', {}, ['Status', 'URL', 'Kind', 'Time'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, r.items.map((i) => h('tr', { class: i.status === null || i.status >= 400 ? 'check-bad' : '' },
          h('td', {}, i.status === null ? 'none' : String(i.status)),
          h('td', { class: 'check-url' }, i.url,
            i.finalUrl && i.finalUrl !== i.url ? h('span', { class: 'hint' }, ` → ${i.finalUrl}`) : null,
            i.error ? h('span', { class: 'check-error' }, i.error) : null),
          h('td', {}, i.kind),
          h('td', {}, `${i.timeMs} ms`)))));
    return [summary, broken === 0, details];
  },

  spam(r) {
    const summary = `Score ${r.score} of ${r.threshold}: ${r.isSpam ? 'spam' : 'not spam'} (${r.rules.length} rules hit)`;
    const details = [
      r.truncated ? h('p', { class: 'hint' }, `Only the first ${r.scoredBytes} bytes were scored, as spamc does.`) : null,
      h('table', { class: 'check-table' },
        h('caption', { class: 'visually-hidden' }, 'The SpamAssassin rules that hit'),
        h('thead', {}, h('tr', {}, ['Score', 'Rule', 'Description'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, r.rules.map((x) => h('tr', {}, h('td', {}, String(x.score)), h('td', {}, x.name), h('td', {}, x.description)))))];
    return [summary, !r.isSpam, details];
  },

  auth(r) {
    const dkim = r.dkim.length ? r.dkim.map((d) => d.result).join(', ') : 'no signature';
    const summary = `DKIM ${dkim} · SPF ${r.spf.result} · DMARC ${r.dmarc.result}`;
    const rows = [
      ...r.dkim.map((d) => ['DKIM', d.result, `${d.domain} (selector ${d.selector})`, d.reason]),
      ['SPF', r.spf.result, r.spf.domain || '—', r.spf.reason],
      ['DMARC', r.dmarc.result, r.dmarc.domain || '—', r.dmarc.policy ? `${r.dmarc.reason} (policy: ${r.dmarc.policy})` : r.dmarc.reason],
    ];
    const details = [
      h('table', { class: 'check-table' },
        h('caption', { class: 'visually-hidden' }, 'Authentication results'),
        h('thead', {}, h('tr', {}, ['Check', 'Result', 'Domain', 'Why'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, rows.map(([what, result, domain, why]) => h('tr', { class: result === 'pass' ? '' : 'check-bad' },
          h('td', {}, what), h('td', {}, result), h('td', {}, domain), h('td', {}, why))))),
      r.dkimIgnored ? h('p', { class: 'hint' }, `${r.dkimIgnored} more signatures were not verified (at most 5 are).`) : null,
    ];
    return [summary, r.dmarc.result === 'pass', details];
  },
};

function clientList(label, clients) {
  if (!clients.length) return null;
  return h('div', { class: 'check-clients' }, h('p', {}, h('strong', {}, `${label}:`)),
    h('ul', {}, clients.map((c) => h('li', {}, clientName(c), c.notes.length ? h('span', { class: 'hint' }, ` — ${c.notes.join(' ')}`) : null))));
}
