// What the run page says in words: the run's header, why it waits, and one step's details.

import { text } from './api.js';
import { badge, duration, el, label, time, span } from './format.js';

/**
 * The run's header: state, workflow, times, progress, why it waits, a rollback asked. A run
 * shown `now` and running has lasted until now; one shown in the past, until its last event.
 */
export function header(view, now) {
  const counts = {};
  for (const step of Object.values(view.steps)) counts[step.state] = (counts[step.state] ?? 0) + 1;
  const facts = [
    ['Workflow', view.workflow],
    ['Started', time(view.created_at)],
    ['Duration', duration(span(view.created_at, view.updated_at, now && view.state === 'running'))],
    ['Events', `${view.events} (last #${view.event_id})`],
    ['Steps', Object.entries(counts).map(([state, n]) => `${n} ${label(state)}`).join(' · ')],
  ];
  const parts = [
    el('h1', {}, `Run ${view.run_id} `, badge(view.state)),
    el('dl', { class: 'facts' }, facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
    view.paused ? el('p', { class: 'banner paused' }, pauseText(view.paused)) : null,
    view.rollback ? el('p', { class: 'banner rollback' },
      `Rollback asked by ${view.rollback.by} at ${time(view.rollback.at_ms)} (event #${view.rollback.event_id}): ${view.rollback.reason}`) : null,
  ];
  return parts.filter(Boolean);
}

const tries = (n) => `${n} ${n === 1 ? 'try' : 'tries'}`;

/** Why a run waits for a person. */
export function pauseText(paused) {
  switch (paused.cause) {
    case 'operator':
      return `Paused by ${paused.by}: ${paused.reason}`;
    case 'step_failed':
      return `Waiting for an operator: step ${paused.step} failed after ${tries(paused.attempts)}${paused.error ? `: ${paused.error}` : ''}`;
    default: {
      const retry = paused.retry_with ? ` (override it to ${paused.retry_with} to try again)` : '';
      return `Waiting for an operator: the compensation of ${paused.step} failed after ${tries(paused.tries)}${paused.error ? `: ${paused.error}` : ''}${retry}`;
    }
  }
}

/** One step's details, with its log shown on demand (at once when `withLog`). */
export function stepDetail(name, step, { withLog, onOverride, overridable }) {
  const log = el('pre', { class: 'log', hidden: true });
  const showLog = async () => {
    log.hidden = false;
    log.textContent = 'Loading the log…';
    try {
      log.textContent = (await text(step.log)) || '(the log is empty)';
    } catch (e) {
      log.textContent = `No log: ${e.message}`;
    }
  };
  const facts = [
    ['State', badge(step.state)],
    ['Try', String(step.attempt)],
    ['After', step.depends_on.length ? step.depends_on.join(', ') : '(nothing)'],
    ['Idempotency', step.idempotency + (step.compensate ? ', with a compensation' : '')],
    ['Started', time(step.started_at)],
    ['Duration', duration(step.duration_ms)],
    ['Compensation tries', String(step.compensation_tries)],
    ['Last error', step.error ?? '—'],
  ];
  if (withLog && step.log) showLog();
  return el('section', { class: 'detail', 'data-detail': name },
    el('h2', {}, `Step ${name}`),
    el('dl', { class: 'facts' }, facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
    el('div', { class: 'buttons' },
      step.log ? el('a', { href: step.log, class: 'button', onclick: (e) => { e.preventDefault(); showLog(); } }, `Log of try ${step.attempt}`) : null,
      el('button', { disabled: !overridable, onclick: () => onOverride(name) }, 'Override…')),
    log);
}
