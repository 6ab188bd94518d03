// The runs page: a table of runs (state, workflow, start, duration, progress), filtered by
// state and workflow on the server, the archived runs too when asked, paged by its cursor,
// and polled while the tab is seen; a button opens the start dialog.

import { api, META } from './api.js';
import { href } from './nav.js';
import { badge, duration, el, span, time } from './format.js';
import { poll } from './poll.js';
import { startDialog } from './start.js';

const POLL_MS = 2000;
const PAGE = 50;

/** Mounts the page; returns what unmounts it. */
export function mountRuns(root, params) {
  const filter = { state: params.get('state') ?? '', workflow: params.get('workflow') ?? '', all: params.get('all') ?? '' };
  const cursors = [null];
  const body = el('tbody');
  const table = el('table', { class: 'runs' }, el('thead', {}, headRow()), body);
  const scroll = el('div', { class: 'scroll' }, table);
  const status = el('p', { class: 'muted', 'data-status': true });
  const pager = el('div', { class: 'pager' });
  const start = el('button', { class: 'primary', 'data-start': true, onclick: () => startDialog(filter.workflow || undefined) }, 'Start a run…');
  root.append(
    el('div', { class: 'title-row' }, el('h1', {}, 'Runs'), start),
    filters(filter),
    scroll,
    pager,
    status,
  );
  const load = async () => {
    const page = await api(`/api/v1/runs?${query(filter, cursors.at(-1))}`);
    body.replaceChildren(...page.runs.map(row));
    if (page.runs.length === 0) body.append(el('tr', {}, el('td', { colspan: 7, class: 'muted' }, 'No runs match.')));
    pager.replaceChildren(...pageButtons(cursors, page.next_cursor, () => polled.now()));
    table.dataset.filter = `${filter.state}|${filter.workflow}${filter.all ? '|all' : ''}`; // what the rows shown match
  };
  const polled = poll(load, status, POLL_MS);
  return polled.stop;
}

function query(filter, cursor) {
  const q = new URLSearchParams({ limit: PAGE });
  if (filter.state) q.set('state', filter.state);
  if (filter.workflow) q.set('workflow', filter.workflow);
  if (filter.all) q.set('all', 'true');
  if (cursor) q.set('cursor', cursor);
  return q.toString();
}

/** The filters; a change is a new fragment (so it can be linked and goes back). */
function filters(filter) {
  const go = (change) => {
    location.hash = href(['runs'], { ...filter, ...change });
  };
  const state = el('select', { name: 'state', onchange: (e) => go({ state: e.target.value }) },
    el('option', { value: '' }, 'every state'),
    META.run_states.map((s) => el('option', { value: s, selected: s === filter.state }, s.replace('_', ' '))));
  const workflow = el('select', { name: 'workflow', onchange: (e) => go({ workflow: e.target.value }) },
    el('option', { value: '' }, 'every workflow'));
  if (filter.workflow) workflow.append(el('option', { value: filter.workflow, selected: true }, filter.workflow));
  api('/api/v1/workflows').then(({ workflows }) => {
    for (const w of workflows) {
      if (w.name !== filter.workflow) workflow.append(el('option', { value: w.name }, w.name));
    }
  }, () => {});
  const all = el('input', { type: 'checkbox', name: 'all', checked: Boolean(filter.all), onchange: (e) => go({ all: e.target.checked ? 'true' : '' }) });
  return el('div', { class: 'filters' }, el('label', {}, 'State ', state), el('label', {}, 'Workflow ', workflow),
    el('label', { title: 'the runs gc moved to the archive (slower: each is read from it)' }, all, ' archived runs too'));
}

function headRow() {
  return el('tr', {}, ['Run', 'State', 'Workflow', 'Started', 'Duration', 'Steps done', 'Events'].map((h) => el('th', {}, h)));
}

function row(run) {
  const running = run.state === 'running';
  return el('tr', { 'data-run': run.run_id },
    el('td', { class: 'run-id' }, el('a', { href: href(['runs', run.run_id]) }, run.run_id),
      run.archived ? el('span', { class: 'tag' }, 'archived') : null),
    el('td', {}, badge(run.state)),
    el('td', {}, run.workflow),
    el('td', {}, time(run.created_at)),
    el('td', {}, duration(span(run.created_at, run.updated_at, running))),
    el('td', { class: 'num' }, `${run.steps_done} / ${run.steps}`),
    el('td', { class: 'num' }, String(run.events)));
}

/** Newer / older page buttons over a stack of cursors. */
function pageButtons(cursors, next, load) {
  const newer = el('button', { disabled: cursors.length === 1, onclick: () => { cursors.pop(); load(); } }, '← Newer');
  const older = el('button', { disabled: !next, onclick: () => { cursors.push(next); load(); } }, 'Older →');
  return [newer, el('span', { class: 'muted' }, `page ${cursors.length}`), older];
}
