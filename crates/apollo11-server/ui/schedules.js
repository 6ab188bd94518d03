// The schedules page: every schedule of the registered workflows (cron and zone, next fires
// in its zone and in UTC, last fire and its run's state, enabled or not, paused when the
// server says so), the recent runs of each, and a backfill dialog per schedule; polled
// while the tab is seen.

import { api } from './api.js';
import { badge, el, utc } from './format.js';
import { href } from './nav.js';
import { poll } from './poll.js';
import { backfillDialog } from './backfill.js';
import { scheduleAction } from './actions.js';

const POLL_MS = 2000;
/** The workflow's newest runs read for a schedule's history. */
const HISTORY_READ = 200;
/** The runs a schedule's history shows. */
const HISTORY_SHOWN = 10;
const STAMP = /^\d{8}T\d{6}Z$/;

/** Mounts the page; returns what unmounts it. */
export function mountSchedules(root) {
  const body = el('tbody');
  const history = el('div', { 'data-history': true });
  const status = el('p', { class: 'muted', 'data-status': true });
  root.append(
    el('h1', {}, 'Schedules'),
    el('div', { class: 'scroll' }, el('table', { class: 'schedules' },
      el('thead', {}, el('tr', {}, ['Schedule', 'Cron', 'Next fire', 'Last fire', 'State', ''].map((h) => el('th', {}, h)))),
      body)),
    el('h2', {}, 'Recent runs'),
    history,
    status,
  );
  const load = async () => {
    const { schedules } = await api('/api/v1/schedules');
    body.replaceChildren(...(schedules.length ? schedules.map(row)
      : [el('tr', {}, el('td', { colspan: 6, class: 'muted' }, 'No registered workflow declares a schedule.'))]));
    history.replaceChildren(...await histories(schedules));
  };
  return poll(load, status, POLL_MS).stop;
}

/** `workflow / name`, the key of a schedule's row and history. */
const key = (s) => `${s.workflow}/${s.name}`;

function row(s) {
  return el('tr', { 'data-schedule': key(s) },
    el('td', { class: 'name' }, `${s.workflow} / ${s.name}`),
    el('td', {}, el('code', {}, s.cron), el('div', { class: 'muted' }, s.zone)),
    el('td', { 'data-next': true }, s.paused
      ? el('span', { class: 'muted' }, 'none while paused')
      : fireTime(s.next_fires[0], s.zone)),
    el('td', { 'data-last': true }, lastFire(s)),
    el('td', { 'data-state': true }, scheduleState(s)),
    el('td', {}, actions(s)));
}

/** A fire time in the schedule's zone, and under it in UTC (`—` for none): a list of nodes. */
function fireTime(ms, zone) {
  if (ms === undefined || ms === null) return ['—'];
  return [el('div', {}, `${inZone(ms, zone)} ${zone}`), el('div', { class: 'muted' }, utc(ms))];
}

/** `YYYY-MM-DD HH:MM:SS` in `zone`. */
function inZone(ms, zone) {
  return new Intl.DateTimeFormat('sv-SE', {
    timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false,
  }).format(ms);
}

function lastFire(s) {
  if (!s.last_fire) return el('span', { class: 'muted' }, 'never');
  const { fire_time: fire, run_id: run, state } = s.last_fire;
  return [...fireTime(fire, s.zone), el('div', {}, el('a', { href: href(['runs', run]) }, run), ' ', state ? badge(state) : null)];
}

/** Enabled or not, and paused with who and why (`pause`, its latest pause or resume). */
function scheduleState(s) {
  const parts = [el('div', {}, s.enabled ? 'enabled' : 'disabled (fires nothing)')];
  if (s.paused && s.pause) parts.push(el('div', { class: 'error', 'data-paused': true }, `paused by ${s.pause.by}: ${s.pause.reason}`));
  return parts;
}

/** The schedule's buttons: backfill, and pause or resume. */
function actions(s) {
  const toggle = s.paused ? 'resume' : 'pause';
  return el('div', { class: 'buttons' },
    el('button', { 'data-backfill': true, onclick: () => backfillDialog(s) }, 'Backfill…'),
    el('button', { [`data-schedule-${toggle}`]: true, onclick: () => scheduleAction(s, toggle) },
      s.paused ? 'Resume…' : 'Pause…'));
}

/** Each schedule's recent runs, the workflows' runs read once per workflow. */
async function histories(schedules) {
  const workflows = [...new Set(schedules.map((s) => s.workflow))];
  const runs = new Map(await Promise.all(workflows.map(async (w) =>
    [w, (await api(`/api/v1/runs?workflow=${encodeURIComponent(w)}&limit=${HISTORY_READ}`)).runs])));
  return schedules.map((s) => {
    const mine = runs.get(s.workflow).filter((r) => firedBy(r.run_id, s)).slice(0, HISTORY_SHOWN);
    return el('section', { class: 'history', 'data-history-of': key(s) },
      el('h3', {}, `${s.workflow} / ${s.name}`),
      mine.length
        ? el('ul', { class: 'runs-of' }, mine.map((r) => el('li', { 'data-run': r.run_id },
          badge(r.state), ' ', el('a', { href: href(['runs', r.run_id]) }, r.run_id))))
        : el('p', { class: 'muted' }, `None among the workflow's newest ${HISTORY_READ} runs.`));
  });
}

/** Whether `id` is the id schedule `s` gives a fire: `WORKFLOW-NAME-20261206T030000Z`. */
function firedBy(id, s) {
  const head = `${s.workflow}-${s.name}-`;
  return id.startsWith(head) && STAMP.test(id.slice(head.length));
}
