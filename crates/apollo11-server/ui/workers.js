// The workers page: the workers the server hears from (labels, slots, tries at work, last
// heartbeat, connected since) and the tries waiting for one by the labels they need, a
// label set no connected worker carries said as a warning; polled while the tab is seen.

import { api } from './api.js';
import { duration, el, time } from './format.js';
import { poll } from './poll.js';

const POLL_MS = 2000;

/** Mounts the page; returns what unmounts it. */
export function mountWorkers(root) {
  const workers = el('tbody');
  const queued = el('tbody');
  const lost = el('p', { class: 'muted', 'data-lost': true });
  const warning = el('p', { class: 'banner warn', 'data-unmatched': true, hidden: true });
  const status = el('p', { class: 'muted', 'data-status': true });
  root.append(
    el('h1', {}, 'Workers'),
    table('workers', ['Name', 'Labels', 'Slots', 'Running', 'Last heartbeat', 'Connected since', 'Version'], workers),
    lost,
    el('h2', {}, 'Tries waiting for a worker'),
    warning,
    table('queue', ['Labels needed', 'Tries', 'Oldest wait', 'A worker for them'], queued),
    status,
  );
  const load = async () => {
    const answer = await api('/api/v1/workers');
    workers.replaceChildren(...rowsOr(answer.workers.map(workerRow), 7, 'No worker is connected to this server.'));
    queued.replaceChildren(...rowsOr(answer.queued.map(queueRow), 4, 'No try waits for a worker.'));
    lost.textContent = `Workers lost (silent past the heartbeat timeout, their tries failed as worker_lost): ${answer.lost}.`;
    const unmatched = answer.queued.filter((q) => !q.matched);
    warning.hidden = unmatched.length === 0;
    warning.textContent = `${unmatched.length === 1 ? 'One label set has' : `${unmatched.length} label sets have`} tries waiting that no connected worker carries: `
      + 'they fail with no_worker past their queue_timeout unless a worker with those labels connects.';
  };
  return poll(load, status, POLL_MS).stop;
}

function table(name, heads, body) {
  return el('div', { class: 'scroll' },
    el('table', { class: name }, el('thead', {}, el('tr', {}, heads.map((h) => el('th', {}, h)))), body));
}

/** `rows`, or one row saying `empty` across `columns`. */
function rowsOr(rows, columns, empty) {
  return rows.length ? rows : [el('tr', {}, el('td', { colspan: columns, class: 'muted' }, empty))];
}

/** Labels as `name=value` tags, each one text. */
function labels(set) {
  return Object.entries(set).map(([name, value]) => el('code', { class: 'label' }, `${name}=${value}`));
}

function workerRow(w) {
  return el('tr', { 'data-worker': w.name },
    el('td', { class: 'name' }, w.name),
    el('td', {}, labels(w.labels)),
    el('td', { class: 'num' }, String(w.slots)),
    el('td', { class: 'num', 'data-running': true }, `${w.running} / ${w.slots}`),
    el('td', {}, `${duration(w.last_heartbeat_ms_ago)} ago`),
    el('td', {}, w.connected_since_ms ? time(w.connected_since_ms) : 'not yet (a try adopted after a restart names it)'),
    el('td', {}, w.version));
}

function queueRow(q) {
  return el('tr', { class: q.matched ? null : 'unmatched', 'data-needs': JSON.stringify(q.needs) },
    el('td', {}, labels(q.needs)),
    el('td', { class: 'num' }, String(q.tries)),
    el('td', {}, duration(q.oldest_ms)),
    el('td', { 'data-matched': String(q.matched) }, q.matched
      ? 'a connected worker carries them'
      : el('strong', { class: 'error' }, '⚠ no connected worker carries these labels')));
}
