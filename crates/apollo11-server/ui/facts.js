// What the run page says in words: the run's header, why it waits, and one step's details.

import { log as fetchLog, META } from './api.js';
import { badge, duration, el, label, ranCommand, time, span } from './format.js';
import { classPrefix, placeWords } from './timeline.js';

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
    ...startedBy(view),
    ['Duration', duration(span(view.created_at, view.updated_at, now && view.state === 'running'))],
    ['Events', `${view.events} (last #${view.event_id})`],
    ['Steps', Object.entries(counts).map(([state, n]) => `${n} ${label(state)}`).join(' · ')],
  ];
  if (view.params.length) facts.push(['Parameters', parameters(view)]);
  const atWork = counts.running ?? 0;
  const state = view.pausing ? el('span', { class: 'badge st-paused', 'data-pausing': true }, `pausing (waiting for ${steps(atWork)})`) : badge(view.state);
  const parts = [
    el('h1', {}, `Run ${view.run_id} `, state, view.archived ? el('span', { class: 'tag', 'data-archived': true }, 'archived') : null),
    el('dl', { class: 'facts' }, facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
    view.archived ? el('p', { class: 'banner archived' }, 'Archived by gc: answered from the archive, it takes no more actions.') : null,
    view.pausing ? el('p', { class: 'banner paused' },
      `Pause asked by ${view.pausing.by} at ${time(view.pausing.at_ms)} (event #${view.pausing.event_id}): ${view.pausing.reason}. Nothing new starts; the run is paused once its ${steps(atWork)} at work finish.`) : null,
    view.paused ? el('p', { class: 'banner paused' }, pauseText(view.paused)) : null,
    view.rollback ? el('p', { class: 'banner rollback' },
      `Rollback asked by ${view.rollback.by} at ${time(view.rollback.at_ms)} (event #${view.rollback.event_id}): ${view.rollback.reason}`) : null,
  ];
  return parts.filter(Boolean);
}

/** What started the run, when a front end pinned it: a schedule and its fire time. */
function startedBy(view) {
  const by = view.started_by ?? {};
  if (!by.schedule) return [];
  return [['Scheduled', el('span', { 'data-started-by': true }, `by schedule ${by.schedule}, fire time ${by.fire_time}`)]];
}

/**
 * The run's parameters: each declared one with the value it started with; a secret's
 * value is never shown, only where the server reads it.
 */
function parameters(view) {
  return el('dl', { class: 'facts params', 'data-params': true }, view.params.flatMap((p) => [
    el('dt', {}, p.name),
    el('dd', { 'data-param': p.name }, p.secret
      ? el('span', { class: 'muted', 'data-secret': true }, `•••••• (secret, read ${secretSource(p)} at each try)`)
      : el('code', {}, p.name in view.arguments ? JSON.stringify(view.arguments[p.name]) : '(none)')),
  ]));
}

/** Where the server reads a secret parameter, in words. */
export function secretSource(param) {
  return param.secret_env ? `from the server's environment variable ${param.secret_env}` : 'from a file on the server';
}

const TRIGGERS = {
  all_succeeded: 'when every step before it succeeded or was skipped',
  all_done: 'when every step before it is done, whatever its outcome',
  one_failed: 'when a step before it failed for good, every one done',
};

/** Which for_each declaration and item made a step, in words. */
function origin(made) {
  const wave = made.wave ? `, wave ${made.wave}` : '';
  return el('span', { 'data-origin': true }, `for_each of ${made.declaration}: item ${made.key}${wave}`);
}

const tries = (n) => `${n} ${n === 1 ? 'try' : 'tries'}`;
const steps = (n) => `${n} ${n === 1 ? 'step' : 'steps'}`;

/** Why a run waits for a person. */
export function pauseText(paused) {
  switch (paused.cause) {
    case 'operator':
      return `Paused by ${paused.by}: ${paused.reason}`;
    case 'step_failed':
      return `Waiting for an operator: step ${paused.step} failed after ${tries(paused.attempts)}${paused.error ? `: ${classPrefix(paused.class)}${paused.error}` : ''}${paused.stopped ? ` (${paused.stopped})` : ''}`;
    default: {
      const retry = paused.retry_with ? ` (override it to ${paused.retry_with} to try again)` : '';
      return `Waiting for an operator: the compensation of ${paused.step} failed after ${tries(paused.tries)}${paused.error ? `: ${paused.error}` : ''}${retry}`;
    }
  }
}

/** One step's details, with a log shown on demand: any try's, or its compensation's. */
export function stepDetail(name, step, { withLog, onOverride, overridable, onRerun, onSignal }) {
  const log = el('pre', { class: 'log', hidden: true, 'data-log': true });
  const cut = el('p', { class: 'muted', 'data-log-cut': true, hidden: true });
  const of = el('p', { class: 'muted', 'data-log-of': true, hidden: true });
  const showLog = async (url, words) => {
    log.hidden = false;
    cut.hidden = true;
    of.hidden = false;
    of.textContent = `${words}:`;
    log.textContent = 'Loading the log…';
    try {
      const { text, bytes } = await fetchLog(url);
      log.textContent = text || '(the log is empty)';
      const max = META.limits.log_bytes;
      cut.hidden = bytes <= max;
      cut.textContent = `Showing the last ${max / 1048576} MiB of ${bytes.toLocaleString('en')} bytes.`;
    } catch (e) {
      log.textContent = `No log: ${e.message}`;
    }
  };
  // `step.log` is the compensation's log once one ran; the attempt's own is the same without it.
  const compensated = step.log?.endsWith('&compensation=true');
  const attemptLog = compensated ? step.log.slice(0, -'&compensation=true'.length) : step.log;
  const link = (url, words, data) => el('a', { href: url, class: 'button', [data]: true, onclick: (e) => { e.preventDefault(); showLog(url, words); } }, words);
  const lastTry = `Log of try ${step.attempt}`;
  const facts = [
    ['State', badge(step.state)],
    ['Try', String(step.attempt)],
    ['After', step.depends_on.length ? step.depends_on.join(', ') : '(nothing)'],
    ['Runs', el('span', { 'data-trigger': step.trigger }, `${TRIGGERS[step.trigger] ?? step.trigger} (${step.trigger})`)],
    ['Condition', step.condition ? el('code', { 'data-condition': true }, step.condition) : 'none'],
    ['Made by', step.origin ? origin(step.origin) : 'its declaration'],
    step.skip_reason ? ['Skipped', el('span', { 'data-skip-reason': true }, step.skip_reason)] : null,
    ['Idempotency', step.idempotency + (step.compensate ? ', with a compensation' : '')],
    ['Started', time(step.started_at)],
    ['Duration', duration(step.duration_ms)],
    ['Compensation', compensation(step)],
    ['Last error', lastError(step)],
    step.placed ? ['Ran', lastRun(step.placed)] : null,
    step.waiting ? ['Waits', el('span', { 'data-waiting': step.waiting.for }, waitWords(step.waiting))] : null,
  ];
  if (withLog && step.log) showLog(step.log, compensated ? 'Log of its compensation' : lastTry);
  return el('section', { class: 'detail', 'data-detail': name },
    el('h2', {}, `Step ${name}`),
    el('dl', { class: 'facts' }, facts.filter(Boolean).flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
    el('div', { class: 'buttons' },
      step.log ? link(attemptLog, lastTry, 'data-attempt-log') : null,
      step.log ? tryPicker(attemptLog, step.attempt, showLog) : null,
      compensated ? link(step.log, 'Log of its compensation', 'data-compensation-log') : null,
      step.waiting?.for === 'signal' ? el('button', { 'data-signal': true, class: 'primary', onclick: () => onSignal(name) }, 'Signal or approve…') : null,
      el('button', { disabled: !overridable, onclick: () => onOverride(name) }, 'Override…'),
      el('button', { 'data-rerun': 'step', onclick: () => onRerun(name, false) }, 'Rerun…'),
      el('button', { 'data-rerun': 'downstream', onclick: () => onRerun(name, true) }, 'Rerun with downstream…')),
    of, cut, log);
}

/** A waiting step's wait, in words: "waiting for a signal" or "timer until T", and its deadline. */
function waitWords({ until, deadline }) {
  const what = until == null ? 'waiting for a signal' : `timer until ${time(until)}`;
  return deadline == null ? what : `${what} (deadline ${time(deadline)})`;
}

/** A choice of the try whose log to show, when there was more than one: `showLog(url, words)`. */
function tryPicker(lastLog, tries, showLog) {
  if (tries < 2) return null;
  const url = (n) => lastLog.replace(/attempt=\d+$/, `attempt=${n}`);
  const options = Array.from({ length: tries }, (_, i) => tries - i)
    .map((n) => el('option', { value: n, selected: n === tries }, `try ${n}`));
  const pick = el('select', { name: 'log-try', 'data-log-try': true, 'aria-label': 'the try whose log to show',
    onchange: (e) => showLog(url(e.target.value), `Log of try ${e.target.value}`) }, options);
  return el('label', { class: 'log-try' }, 'Log of any try: ', pick);
}

/**
 * Where the step's last try ran and the command it ran (when its executor recorded one), in
 * a block that wraps and a button that copies it.
 */
function lastRun(placed) {
  const which = `${placed.compensation ? 'its compensation, ' : ''}try ${placed.attempt}`;
  const where = el('span', { 'data-ran': true }, `${which}: ${placeWords(placed.host, placed.handle)}`);
  const command = ranCommand(placed.payload);
  if (command === null) return where;
  const block = el('pre', { class: 'command', 'data-last-command': true }, command);
  const copy = el('button', { type: 'button', 'data-copy-command': true, onclick: () => copyText(command, block, copy) }, 'Copy');
  return el('div', {}, where, block, copy);
}

/** Copies `text`; where the browser refuses, selects it in `block` for the user to copy. */
async function copyText(text, block, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    getSelection().selectAllChildren(block);
    button.textContent = 'Selected: copy it with Ctrl+C';
  }
}

/**
 * The last error recorded, why the retries stopped there, and what an operator did after it
 * (an override).
 */
function lastError(step) {
  if ((step.error ?? null) === null) return '—';
  const error = `${classPrefix(step.error_class)}${step.error}`;
  const after = (text, data) => (text ? [el('br'), el('span', { class: 'muted', [data]: true }, text)] : []);
  return el('span', { 'data-last-error': true }, step.error_then ? `${error} (try ${step.error_try})` : error,
    ...after(step.error_stopped && `retries stopped: ${step.error_stopped}`, 'data-error-stopped'),
    ...after(step.error_then, 'data-error-then'));
}

/** What a step's compensation did: none declared, not run, at work, undone, or failed. */
function compensation(step) {
  if (!step.compensate) return 'none declared';
  switch (step.state) {
    case 'compensated':
      return `ran: the work of try ${step.attempt} was undone`;
    case 'compensating':
      return `running, try ${step.compensation_tries}`;
    case 'compensation_failed':
      return `failed after ${tries(step.compensation_tries)}`;
    default:
      return 'not run';
  }
}
