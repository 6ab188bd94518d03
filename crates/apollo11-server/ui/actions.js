// Operator actions: a dialog asks who and why (and, to override a step, the state to set),
// sends the action, and says which event it appended; the server's refusal stays in the
// dialog.

import { api, META, seg } from './api.js';

const BY_KEY = 'apollo11.by';
/**
 * What is too long in `fields`, said as the server would, or null: the server's limits on
 * the notes are bytes of UTF-8 (not characters: 2,048 × "é" is 4,096).
 */
function overLimit(fields) {
  const { by_bytes: by, reason_bytes: reason } = META.limits;
  for (const [name, max] of Object.entries({ by, reason })) {
    const bytes = new TextEncoder().encode(fields[name]).length;
    if (bytes > max) return `${name} is ${bytes} bytes (UTF-8); at most ${max} are allowed`;
  }
  return null;
}

/** The run actions (the keys of the run's `allowed`), in the order of their buttons. */
export const RUN_ACTIONS = {
  pause: { button: 'Pause…', title: 'Pause the run', help: 'Nothing new starts until the run is resumed; steps at work finish.' },
  resume: { button: 'Resume…', title: 'Resume the run', help: 'Lifts the operator\'s pause; the server drives the run again.' },
  rollback: { button: 'Roll back…', title: 'Roll the run back', help: 'Compensates every step that did work, in reverse order, once steps at work end (an operator\'s pause holds it until resumed).' },
};

/** Asks for and sends run action `name` on `runId`; resolves to the server's answer or null. */
export function runAction(runId, name) {
  const { title, help } = RUN_ACTIONS[name];
  return ask({ title, help, target: false }, (fields) =>
    api(`/api/v1/runs/${seg(runId)}/${name}`, { method: 'POST', body: fields }));
}

/**
 * The choices of the override dialog: each target labelled with what the server says it
 * does to this step now (the step's `overrides`), so the label is never a guess.
 */
function fillTargets(choices) {
  const select = document.querySelector('#action-dialog select[name=to]');
  select.replaceChildren(...META.override_targets.filter((to) => choices[to]).map((to) => {
    const option = document.createElement('option');
    option.value = to;
    option.textContent = `${to} (${choices[to].says})`;
    option.dataset.does = choices[to].does;
    return option;
  }));
}

/**
 * Asks for and sends an override of `step`, whose `choices` are its `overrides` in the run
 * object; resolves to the server's answer or null.
 */
export function overrideStep(runId, step, choices) {
  const help = 'An operator\'s decision, kept in the log with who and why; the server drives the run afterwards.';
  return ask({ title: `Override step ${step}`, help, target: true, choices }, (fields) =>
    api(`/api/v1/runs/${seg(runId)}/steps/${seg(step)}/override`, { method: 'POST', body: fields }));
}

/**
 * Asks for and sends a signal to `step`, a step waiting for one, with the JSON its dialog
 * holds (prefilled with `{"approved": true}` to approve); the server refuses it (409) when
 * the step is not waiting.
 */
export function signalStep(runId, step) {
  const help = 'Ends the step\'s wait: its data becomes the step\'s output for the steps after it; kept in the log with who and why.';
  return ask({ title: `Signal step ${step}`, help, target: false, data: true }, (fields) =>
    api(`/api/v1/runs/${seg(runId)}/steps/${seg(step)}/signal`, { method: 'POST', body: fields }));
}

/** Pauses or resumes (`name`) schedule `s`; resolves to its pause state, or null if cancelled. */
export function scheduleAction(s, name) {
  const help = name === 'pause'
    ? 'The schedule fires nothing until resumed, on every server sharing the store; kept with who and why.'
    : 'The schedule fires again; what came due while it was paused starts as its catch_up says.';
  const verb = name === 'pause' ? 'Pause' : 'Resume';
  return ask({ title: `${verb} schedule ${s.workflow}/${s.name}`, help, target: false, submit: verb }, (fields) =>
    api(`/api/v1/schedules/${seg(s.workflow)}/${seg(s.name)}/${name}`, { method: 'POST', body: fields }));
}

/** The data field of a signal, read as JSON: `{data}` (none when empty), or `{error}`. */
function signalData(text) {
  if (!text.trim()) return { data: null };
  try {
    return { data: JSON.parse(text) };
  } catch (e) {
    return { error: `data is not JSON: ${e.message}` };
  }
}

/** What a rerun's plan (`{steps, compensate}`) does, in words for its confirmation. */
export function rerunWords({ steps, compensate }) {
  const first = compensate.length
    ? `First compensated, in this order: ${compensate.join(', ')}. `
    : 'Nothing is compensated first. ';
  return `${first}Then run again, each with a fresh budget of attempts: ${steps.join(', ')}.`;
}

/**
 * Asks for and sends a rerun of `step` (with `downstream`, of the steps after it too); the
 * confirmation says what the server plans to compensate and run again, or why it refuses.
 */
export async function rerunStep(runId, step, downstream) {
  const path = `/api/v1/runs/${seg(runId)}/steps/${seg(step)}/rerun`;
  let help;
  let refused = false;
  try {
    help = rerunWords(await api(`${path}?downstream=${downstream}`));
  } catch (err) {
    help = `Refused now: ${err.message}`;
    refused = true;
  }
  const title = downstream ? `Rerun step ${step} and the steps after it` : `Rerun step ${step}`;
  return ask({ title, help, target: false, refused }, (fields) =>
    api(path, { method: 'POST', body: { ...fields, downstream } }));
}

/**
 * Opens the dialog; `send(fields)` on submit: its answer closes it, its error stays shown.
 * With `refused` (the server already said no, in `help`), its submit button is disabled;
 * `submit` names that button (an action that appends no event: a schedule's pause).
 */
function ask({ title, help, target, choices, refused = false, data = false, submit: label = 'Append the event' }, send) {
  const dialog = document.getElementById('action-dialog');
  const form = dialog.querySelector('form');
  form.reset();
  if (target) fillTargets(choices ?? {});
  dialog.querySelector('[data-title]').textContent = title;
  const helpText = dialog.querySelector('[data-help]');
  helpText.textContent = help;
  helpText.className = refused ? 'error' : 'muted';
  dialog.querySelector('[data-to-row]').hidden = !target;
  dialog.querySelector('[data-data-row]').hidden = !data;
  if (data) form.elements.data.value = '{"approved": true}';
  const error = dialog.querySelector('[data-error]');
  error.textContent = '';
  form.elements.by.value = localStorage.getItem(BY_KEY) ?? '';
  const ok = dialog.querySelector('[data-submit]');
  ok.disabled = refused;
  ok.textContent = label;
  return new Promise((resolve) => {
    const submit = async (e) => {
      e.preventDefault();
      if (e.submitter?.value === 'cancel') return dialog.close();
      // One request at a time: a second click while it is in flight would append twice.
      if (ok.disabled) return;
      const fields = { by: form.elements.by.value.trim(), reason: form.elements.reason.value.trim() };
      if (target) fields.to = form.elements.to.value;
      const signal = data ? signalData(form.elements.data.value) : {};
      const tooLong = signal.error ?? overLimit(fields);
      if (tooLong) {
        error.textContent = tooLong;
        return;
      }
      if (data) fields.data = signal.data;
      error.textContent = 'Sending…';
      ok.disabled = true;
      try {
        const answer = await send(fields);
        localStorage.setItem(BY_KEY, fields.by);
        resolve(answer);
        dialog.close();
      } catch (err) {
        error.textContent = `Refused: ${err.message}`;
      } finally {
        ok.disabled = false;
      }
    };
    form.addEventListener('submit', submit);
    dialog.addEventListener('close', () => {
      form.removeEventListener('submit', submit);
      resolve(null);
    }, { once: true });
    dialog.showModal();
  });
}
