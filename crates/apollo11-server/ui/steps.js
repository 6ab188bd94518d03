// The steps table of the run as shown (now or at an event): topological order, filtered by
// state, a page of PAGE rows at a time.

import { badge, duration, el, time } from './format.js';
import { pageButtons } from './pager.js';
import { classPrefix } from './timeline.js';
import { META } from './api.js';
import { usageCell } from './usage.js';

const PAGE = 100;
const ERROR_CHARS = 120;

/** The table; `onSelect(name)` when a step is picked, `onOverride(name)` for its button. */
export class Steps {
  constructor(host, onSelect, onOverride) {
    this.page = 0;
    this.state = '';
    this.actions = { onSelect, onOverride };
    const filter = el('select', { name: 'step-state', onchange: (e) => { this.state = e.target.value; this.page = 0; this.render(); } },
      el('option', { value: '' }, 'every state'), META.step_states.map((s) => el('option', { value: s }, s.replace('_', ' '))));
    this.body = el('tbody');
    this.pager = el('div');
    this.count = el('span', { class: 'muted' });
    host.append(el('div', { class: 'filters' }, el('label', {}, 'Steps in state ', filter), this.count),
      el('div', { class: 'scroll' }, el('table', { class: 'steps' }, el('thead', {}, el('tr', {},
        ['Step', 'State', 'Try', 'Duration', 'Used', 'Started', 'Last error, why skipped', 'Log', ''].map((h) => el('th', {}, h)))), this.body)),
      this.pager);
  }

  /** Shows `view`'s steps; `overridable` false disables the override buttons. */
  update(view, overridable) {
    this.view = view;
    this.overridable = overridable;
    this.render();
  }

  /** Goes to the page of step `name` (clearing a filter that hides it). */
  show(name) {
    if (this.state && this.view.steps[name].state !== this.state) this.state = '';
    this.page = Math.floor(this.rows().indexOf(name) / PAGE);
    this.selected = name;
    this.render();
  }

  rows() {
    return this.view.order.filter((name) => !this.state || this.view.steps[name].state === this.state);
  }

  render() {
    const rows = this.rows();
    const pages = Math.ceil(rows.length / PAGE);
    this.page = Math.min(this.page, Math.max(pages - 1, 0));
    this.count.textContent = `${rows.length} of ${this.view.order.length} steps`;
    this.body.replaceChildren(...rows.slice(this.page * PAGE, (this.page + 1) * PAGE).map((name) => this.row(name)));
    this.pager.replaceChildren(pageButtons(this.page, pages, (page) => { this.page = page; this.render(); }));
  }

  row(name) {
    const step = this.view.steps[name];
    const failure = `${classPrefix(step.error_class)}${step.error}`;
    const error = step.error_then ? `${failure} — ${step.error_then}` : (step.error ?? null) !== null ? failure : (step.skip_reason ? `skipped: ${step.skip_reason}` : '');
    return el('tr', { 'data-step': name, class: name === this.selected ? 'selected' : null },
      el('td', {}, el('button', { class: 'link', onclick: () => this.actions.onSelect(name) }, name)),
      el('td', {}, badge(step.state)),
      el('td', { class: 'num' }, String(step.attempt)),
      el('td', { class: 'num' }, duration(step.duration_ms)),
      usageCell(step.usage),
      el('td', {}, time(step.started_at)),
      el('td', { class: (step.error ?? null) === null && step.skip_reason ? 'error-text skip' : 'error-text', title: error }, error.length > ERROR_CHARS ? `${error.slice(0, ERROR_CHARS)}…` : error),
      el('td', {}, step.log ? el('a', { href: step.log, onclick: (e) => { e.preventDefault(); this.actions.onSelect(name, true); } }, 'log') : '—'),
      el('td', {}, el('button', { disabled: !this.overridable, onclick: () => this.actions.onOverride(name) }, 'Override…')));
  }
}
